package overlay

import (
	"os"
	"path/filepath"
	"testing"
)

// Whether the kernel offers overlayfs is read from the proc root given.
func TestSupported(t *testing.T) {
	for text, ok := range map[string]bool{
		"nodev\tproc\nnodev\toverlay\n\text4\n": true,
		"nodev\tproc\n\text4\n":                 false,
	} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "filesystems"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Supported(root); (err == nil) != ok {
			t.Errorf("%q: %v; want supported %v", text, err, ok)
		}
	}
	if err := Supported(t.TempDir()); err == nil {
		t.Error("no filesystems file: supported")
	}
}
