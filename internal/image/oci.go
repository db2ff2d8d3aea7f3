package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/opencontainers/umoci/oci/layer"
)

// ErrBadOCI says a path does not hold an OCI image vfleet can use.
var ErrBadOCI = errors.New("not a usable OCI image")

// OCI is a user's OCI image, unpacked once into a root file system that
// guests use read-only, as they use vfleet's own image.
type OCI struct {
	// Source is where the image was read from.
	Source string `json:"source"`
	// Digest is the image manifest's digest: the cache key, so one image
	// from a layout and from an archive is unpacked once.
	Digest string `json:"digest"`
	// Env is the image's own environment (its config's Env): a user's
	// tools may rely on its PATH.
	Env      []string      `json:"env,omitempty"`
	Layers   int           `json:"layers"`
	Unpacked time.Duration `json:"unpack_ns"`
	// RootFS is the unpacked root file system.
	RootFS string `json:"-"`
}

// ociDir is where unpacked OCI images live, by digest.
func ociDir(root string) string { return filepath.Join(imagesDir(root), "oci") }

// CheckOCI opens the image at path as EnsureOCI would, without unpacking
// it, so that a scenario naming a path that holds no usable image is
// refused when it is loaded.
func CheckOCI(path string) error {
	_, done, err := openOCI(path)
	done()
	return err
}

// EnsureOCI returns the image at path unpacked, unpacking it once per
// manifest digest under a lock.
func EnsureOCI(ctx context.Context, root, path string, progress func(string)) (*OCI, error) {
	if progress == nil {
		progress = func(string) {}
	}
	img, done, err := openOCI(path)
	defer done()
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadOCI, path, err)
	}
	dir := ociDir(root)
	final := filepath.Join(dir, digest.Hex)
	if o, err := readOCI(final); err == nil {
		return o, nil
	}
	unlock, err := lockBuild(ctx, final, "unpacking "+path, progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if o, err := readOCI(final); err == nil {
		return o, nil // unpacked by another vfleet while this one waited
	}
	removeStaleBuilds(final)
	tmp, err := os.MkdirTemp(dir, buildDirPrefix(final))
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	o, err := unpackOCI(ctx, img, path, tmp, progress)
	if err != nil {
		return nil, err
	}
	o.Digest = digest.String()
	b, _ := json.MarshalIndent(o, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "oci.json"), b, 0o644); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return readOCI(final)
}

// readOCI opens an unpacked image; oci.json is written last, so its
// presence marks the image complete.
func readOCI(dir string) (*OCI, error) {
	b, err := os.ReadFile(filepath.Join(dir, "oci.json"))
	if err != nil {
		return nil, err
	}
	var o OCI
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	o.RootFS = filepath.Join(dir, "rootfs")
	return &o, nil
}

func unpackOCI(ctx context.Context, img v1.Image, path, dir string, progress func(string)) (*OCI, error) {
	began := time.Now()
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: image config: %v", ErrBadOCI, path, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadOCI, path, err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	progress(fmt.Sprintf("unpacking %s (%d layers)", path, len(layers)))
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("unpacking %s interrupted: %w", path, err)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: layer %d: %v", ErrBadOCI, path, i+1, err)
		}
		// umoci applies the layer as the OCI image spec says: whiteouts,
		// opaque directories, hard links, owners and modes, never outside
		// the root.
		err = layer.UnpackLayer(rootfs, rc, &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{}})
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: layer %d: %v", ErrBadOCI, path, i+1, err)
		}
	}
	progress(fmt.Sprintf("unpacked %s in %s", path, time.Since(began).Round(time.Millisecond)))
	return &OCI{Source: path, Env: cfg.Config.Env, Layers: len(layers), Unpacked: time.Since(began)}, nil
}

// openOCI reads the one image at path: an OCI image layout directory, an
// OCI archive (a layout in a tar file), or a `docker save` archive. done
// releases what reading it needed, and must be called whatever the error.
func openOCI(path string) (img v1.Image, done func(), err error) {
	done = func() {}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, done, fmt.Errorf("%w: %v", ErrBadOCI, err)
	}
	if fi.IsDir() {
		img, err := fromLayout(path)
		return img, done, err
	}
	members, err := tarMembers(path)
	if err != nil {
		return nil, done, fmt.Errorf("%w: %s: not a directory or a tar archive: %v", ErrBadOCI, path, err)
	}
	switch {
	case members["manifest.json"]:
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, done, fmt.Errorf("%w: %s: docker archive: %v", ErrBadOCI, path, err)
		}
		return img, done, nil
	case members["oci-layout"] && members["index.json"]:
		tmp, err := os.MkdirTemp("", "vfleet-oci-")
		if err != nil {
			return nil, done, err
		}
		done = func() { os.RemoveAll(tmp) }
		// tar itself, which refuses members that would land outside tmp.
		out, err := exec.Command("tar", "-x", "-f", path, "-C", tmp, "--no-same-owner").CombinedOutput()
		if err != nil {
			return nil, done, fmt.Errorf("%w: %s: extract the OCI archive: %v: %s", ErrBadOCI, path, err, strings.TrimSpace(string(out)))
		}
		img, err := fromLayout(tmp)
		if err != nil {
			err = fmt.Errorf("%w (in the archive %s)", err, path)
		}
		return img, done, err
	}
	return nil, done, fmt.Errorf("%w: %s: a tar archive with no image manifest: neither an OCI archive (oci-layout and index.json) nor a docker save archive (manifest.json)", ErrBadOCI, path)
}

// tarMembers lists the top-level names of a tar archive's members.
func tarMembers(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		names[strings.TrimPrefix(h.Name, "./")] = true
	}
	if len(names) == 0 {
		return nil, errors.New("empty")
	}
	return names, nil
}

// fromLayout picks the image of this host's platform in a layout.
func fromLayout(dir string) (v1.Image, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return nil, fmt.Errorf("%w: %s: a directory without oci-layout is not an OCI image layout", ErrBadOCI, dir)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadOCI, dir, err)
	}
	img, err := pickImage(idx, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadOCI, dir, err)
	}
	return img, nil
}

// pickImage follows an index (and nested indexes, as docker writes them)
// to the one image for this host's platform.
func pickImage(idx v1.ImageIndex, depth int) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var fits []v1.Descriptor
	for _, d := range m.Manifests {
		if p := d.Platform; p != nil && (p.OS != "linux" || p.Architecture != runtime.GOARCH) {
			continue
		}
		if d.MediaType.IsImage() || d.MediaType.IsIndex() {
			fits = append(fits, d)
		}
	}
	switch {
	case len(fits) == 0:
		return nil, fmt.Errorf("no image for linux/%s in its index (%d entries)", runtime.GOARCH, len(m.Manifests))
	case len(fits) > 1:
		return nil, fmt.Errorf("%d images for linux/%s in its index: keep one in the layout", len(fits), runtime.GOARCH)
	case fits[0].MediaType.IsImage():
		return idx.Image(fits[0].Digest)
	case depth >= 2:
		return nil, errors.New("indexes nested more than two deep")
	}
	inner, err := idx.ImageIndex(fits[0].Digest)
	if err != nil {
		return nil, err
	}
	return pickImage(inner, depth+1)
}
