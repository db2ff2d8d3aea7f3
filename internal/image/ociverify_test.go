package image_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/testutil"
)

// A layer whose descriptors match but which is no tar.gz is refused when
// the image is checked, before anything is unpacked.
func TestCheckOCIRefusesACorruptLayer(t *testing.T) {
	whole := testutil.TarGz(t, map[string]string{"etc/os-release": "ID=x\n"})
	dir, blobs := testutil.OCILayout(t, whole[:len(whole)-10])
	err := image.CheckOCI(t.TempDir(), dir)
	want := "layer 1 (sha256:" + filepath.Base(blobs[0]) + "): "
	if !errors.Is(err, image.ErrBadOCI) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckOCI: %v, want %q", err, want)
	}
	good, _ := testutil.OCILayout(t, whole)
	if err := image.CheckOCI(t.TempDir(), good); err != nil {
		t.Errorf("a sound layout: %v", err)
	}
}

// An OCI archive is read where its members lie, never extracted: with no
// directory to extract it into, it is read all the same, every blob
// checked.
func TestCheckOCIReadsAnArchiveInPlace(t *testing.T) {
	dir, _ := testutil.OCILayout(t, testutil.TarGz(t, map[string]string{"etc/os-release": "ID=x\n"}))
	archive := filepath.Join(t.TempDir(), "oci.tar")
	if out, err := exec.Command("tar", "-cf", archive, "-C", dir, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "gone"))
	if err := image.CheckOCI(t.TempDir(), archive); err != nil {
		t.Fatal(err)
	}
}
