package image_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
	dirs, _ := filepath.Glob(filepath.Join(root, "images", "oci", "[0-9a-f]*"))
	// The docker archive re-encodes the manifest (docker media types), so
	// it may be a second entry, never a third.
	if len(dirs) == 0 || len(dirs) > 2 {
		t.Errorf("unpacked %d times: %v", len(dirs), dirs)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(root, "images", "oci", ".build-*")); len(leftovers) > 0 {
		t.Errorf("build directories left: %v", leftovers)
	}
}
