package procfs

import (
	"errors"
	"os"
	"testing"
)

func TestFilesystems(t *testing.T) {
	got, err := Filesystems("testdata/fs")
	if err != nil {
		t.Fatal(err)
	}
	for fs, want := range map[string]bool{"overlay": true, "ext4": true, "proc": true, "nodev": false, "lay": false, "zfs": false} {
		if got[fs] != want {
			t.Errorf("%s: listed %v, want %v", fs, got[fs], want)
		}
	}
	if _, err := Filesystems(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no file: %v; want a missing file", err)
	}
}
