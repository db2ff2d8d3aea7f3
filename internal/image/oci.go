package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

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

// CheckOCI opens the image at path as EnsureOCI would and checks every
// blob against its descriptor, so that a scenario naming a path that holds
// no usable image, or a damaged one, is refused when it is loaded. Its
// layers are read through (not unpacked) unless the image is unpacked
// under root already: the unpacked copy was checked when it was made.
func CheckOCI(root, path string) error {
	src, err := openOCI(path)
	if err != nil {
		return err
	}
	digest, err := src.img.Digest()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadOCI, path, err)
	}
	if _, err := readOCI(filepath.Join(ociDir(root), digest.Hex)); err == nil {
		return nil
	}
	if _, _, err := walkOCI(src, nil); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadOCI, path, err)
	}
	return nil
}

// EnsureOCI returns the image at path unpacked, unpacking it once per
// manifest digest under a lock. Only an image whose every blob matched its
// descriptor is kept.
func EnsureOCI(ctx context.Context, root, path string, progress func(string)) (*OCI, error) {
	if progress == nil {
		progress = func(string) {}
	}
	src, err := openOCI(path)
	if err != nil {
		return nil, err
	}
	digest, err := src.img.Digest()
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
	o, err := unpackOCI(ctx, src, path, tmp, progress)
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

func unpackOCI(ctx context.Context, src ociSource, path, dir string, progress func(string)) (*OCI, error) {
	began := time.Now()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	progress(fmt.Sprintf("unpacking %s", path))
	cfg, layers, err := walkOCI(src, func(tar io.Reader) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		// umoci applies the layer as the OCI image spec says: whiteouts,
		// opaque directories, hard links, owners and modes, never outside
		// the root.
		return layer.UnpackLayer(rootfs, tar, &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{}})
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("unpacking %s interrupted: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadOCI, path, err)
	}
	progress(fmt.Sprintf("unpacked %s (%d layers) in %s", path, layers, time.Since(began).Round(time.Millisecond)))
	return &OCI{Source: path, Env: cfg.Config.Env, Layers: layers, Unpacked: time.Since(began)}, nil
}

// openOCI reads the one image at path: an OCI image layout directory, an
// OCI archive (a layout in a tar file, read in place), or a `docker save`
// archive.
func openOCI(path string) (ociSource, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return ociSource{}, fmt.Errorf("%w: %v", ErrBadOCI, err)
	}
	if fi.IsDir() {
		return fromLayout(dirFiles(path), path)
	}
	members, err := tarMembers(path)
	if err != nil {
		return ociSource{}, fmt.Errorf("%w: %s: not a directory or a tar archive: %v", ErrBadOCI, path, err)
	}
	_, docker := members["manifest.json"]
	_, layout := members["oci-layout"]
	_, index := members["index.json"]
	switch {
	case docker:
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return ociSource{}, fmt.Errorf("%w: %s: docker archive: %v", ErrBadOCI, path, err)
		}
		return ociSource{img: img}, nil
	case layout && index:
		return fromLayout(tarFiles{path: path, members: members}, path)
	}
	return ociSource{}, fmt.Errorf("%w: %s: a tar archive with no image manifest: neither an OCI archive (oci-layout and index.json) nor a docker save archive (manifest.json)", ErrBadOCI, path)
}
