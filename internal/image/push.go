package image

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/stream"

	"github.com/vfleet/vfleet/internal/treetar"
)

// PushOptions say what image a root file system becomes in a registry.
type PushOptions struct {
	// Arch is the image's architecture, as Debian and Go name it.
	Arch string
	// Entrypoint is what a container of the image runs when told nothing
	// else: vfleet's agent.
	Entrypoint []string
	// Labels mark the image (its recipe's hash).
	Labels map[string]string
}

// Push puts a root file system into a registry under ref, as an OCI image
// of one layer, for a cluster to pull (vfleet's pods run it): streamed
// once through the compressor to the registry, never whole in memory or
// on disk. Credentials are the user's, as docker and podman keep them
// (authn.DefaultKeychain); a registry on loopback is spoken to over plain
// HTTP. It returns the reference by digest.
func Push(ctx context.Context, rootfs, ref string, o PushOptions) (string, error) {
	tag, err := pushTag(ref)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(rootfs)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(treetar.Write(pw, rootfs, names)) }()
	defer pr.Close()
	// Fast compression: the push is bound by it on a small machine, and
	// the registry's bytes cost less than the user's wait.
	layer := stream.NewLayer(pr, stream.WithCompressionLevel(gzip.BestSpeed))
	cfg := &v1.ConfigFile{
		OS: "linux", Architecture: o.Arch,
		Config: v1.Config{
			Entrypoint: o.Entrypoint,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels:     o.Labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	// The configuration first, the layer after: the layer's digests are
	// known only once it has gone through to the registry.
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return "", err
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(digest.String()).String(), nil
}

// CheckPushReference refuses a reference Push could not push to, saying
// why, before anything is built.
func CheckPushReference(ref string) error {
	_, err := pushTag(ref)
	return err
}

func pushTag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: %w (want REGISTRY/REPOSITORY:TAG, e.g. registry.example:5000/vfleet/agent:1)", ref, err)
	}
	return tag, nil
}
