package image_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/testutil"
)

// The same image as a layout, an OCI archive and a docker save archive is
// one image, unpacked once: its files and owners as packed, its own
// environment, and no agent.
func TestEnsureOCIFromEveryForm(t *testing.T) {
	f := testutil.Foreign(t)
	root := t.TempDir()
	var digests []string
	for _, path := range []string{f.Layout, f.OCIArchive, f.DockerArchive} {
		o, err := image.EnsureOCI(context.Background(), root, path, func(line string) { t.Log(line) })
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		digests = append(digests, o.Digest)
		if !slices.Contains(o.Env, testutil.ForeignMark) || o.Layers != 1 {
			t.Errorf("%s: %+v", filepath.Base(path), o)
		}
		if target, err := os.Readlink(filepath.Join(o.RootFS, "sbin/init")); err != nil || filepath.Base(target) != "systemd" {
			t.Errorf("%s: /sbin/init -> %q, %v: want systemd", filepath.Base(path), target, err)
		}
		if _, ok := image.LookPath(o.RootFS, "vfleet-agent"); ok {
			t.Errorf("%s: the foreign image has an agent", filepath.Base(path))
		}
		if _, ok := image.LookPath(o.RootFS, "sysbench"); !ok {
			t.Errorf("%s: sysbench not unpacked", filepath.Base(path))
		}
		fi, err := os.Stat(filepath.Join(o.RootFS, "tmp"))
		if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
			t.Errorf("%s: /tmp mode %v, %v", filepath.Base(path), fi.Mode(), err)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("a layout and its archive differ: %v", digests)
	}
	dirs := unpacked(t, filepath.Join(root, "images", "oci"))
	// The docker archive re-encodes the manifest (docker media types), so
	// it may be a second entry, never a third.
	if len(dirs) == 0 || len(dirs) > 2 {
		t.Errorf("unpacked %d times: %v", len(dirs), dirs)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(root, "images", "oci", ".build-*")); len(leftovers) > 0 {
		t.Errorf("build directories left: %v", leftovers)
	}
}

// A layer blob swapped for another valid tar.gz, the manifest unchanged,
// is refused naming the layer, at load and when unpacking, and nothing is
// kept under the genuine manifest's digest.
func TestOCIRefusesASwappedLayer(t *testing.T) {
	testutil.RequiresRoot(t) // unpacking keeps the layers' owners
	genuine := testutil.TarGz(t, map[string]string{"etc/os-release": "ID=genuine\n"})
	dir, blobs := testutil.OCILayout(t, genuine)
	if err := os.WriteFile(blobs[0], testutil.TarGz(t, map[string]string{"etc/os-release": "ID=impostor\n", "bin/x": "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "layer 1 (sha256:" + filepath.Base(blobs[0]) + "): blob does not match its descriptor"
	root := t.TempDir()
	err := image.CheckOCI(root, dir)
	if !errors.Is(err, image.ErrBadOCI) || !errors.Is(err, image.ErrBlobMismatch) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckOCI: %v, want %q", err, want)
	}
	o, err := image.EnsureOCI(context.Background(), root, dir, nil)
	if !errors.Is(err, image.ErrBlobMismatch) || !strings.Contains(err.Error(), want) {
		t.Errorf("EnsureOCI: %+v, %v, want %q", o, err, want)
	}
	if kept := unpacked(t, filepath.Join(root, "images", "oci")); len(kept) > 0 {
		t.Errorf("kept after a mismatch: %v", kept)
	}
	// The same layout, genuine again, unpacks.
	if err := os.WriteFile(blobs[0], genuine, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err = image.EnsureOCI(context.Background(), root, dir, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(o.RootFS, "etc/os-release")); err != nil || string(b) != "ID=genuine\n" {
		t.Errorf("unpacked os-release %q, %v", b, err)
	}
}

// Every form's blobs pass the checks: the layout, its OCI archive and the
// docker archive made from it.
func TestEnsureOCIChecksEveryForm(t *testing.T) {
	testutil.RequiresRoot(t)
	dir, _ := testutil.OCILayout(t, testutil.TarGz(t, map[string]string{"etc/os-release": "ID=every\n"}),
		testutil.TarGz(t, map[string]string{"etc/hostname": "form\n"}))
	ociTar := filepath.Join(t.TempDir(), "oci.tar")
	if out, err := exec.Command("tar", "-cf", ociTar, "-C", dir, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	dockerTar := filepath.Join(t.TempDir(), "docker.tar")
	if err := tarball.WriteToFile(dockerTar, name.MustParseReference("every:form"), img); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, path := range []string{dir, ociTar, dockerTar} {
		if err := image.CheckOCI(root, path); err != nil {
			t.Errorf("CheckOCI %s: %v", filepath.Base(path), err)
		}
		o, err := image.EnsureOCI(context.Background(), root, path, nil)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		if b, err := os.ReadFile(filepath.Join(o.RootFS, "etc/hostname")); err != nil || string(b) != "form\n" || o.Layers != 2 {
			t.Errorf("%s: %d layers, hostname %q, %v", filepath.Base(path), o.Layers, b, err)
		}
	}
}

// unpacked lists the unpacked images in an OCI cache directory: its
// directories, not the per-image lock files beside them.
func unpacked(t *testing.T, cache string) []string {
	t.Helper()
	entries, err := os.ReadDir(cache)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}
