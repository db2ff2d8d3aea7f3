package tools

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseRecordedVersions(t *testing.T) {
	for name, want := range map[string]string{
		"runc": "1.1.5+ds1", "crun": "1.8.1", "mmdebstrap": "1.3.5",
		"qemu-system-x86_64": "7.2.22", "qemu-img": "7.2.22",
	} {
		out, err := os.ReadFile("testdata/" + name + ".version")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParseVersion(name, out); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := ParseVersion("runc", []byte("garbage")); err == nil {
		t.Error("garbage accepted as a version")
	}
}

func TestMissingToolNamesWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, hint := range map[string]string{"runc": "Debian package runc", "qemu-img": "Debian package qemu-utils", "runsc": "not packaged in Debian"} {
		_, err := Find(name)
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), hint) {
			t.Errorf("%s: err = %v, want ErrMissing naming %q", name, err, hint)
		}
	}
	if _, err := Find("no-such-tool"); err == nil || errors.Is(err, ErrMissing) {
		t.Errorf("an unknown tool is a programming error, not a missing one: %v", err)
	}
}
