package image_test

import (
	"errors"
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
