package image

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookPathResolvesLinksInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "etc/alternatives"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, path), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/bin/fio", 0o755)
	write("usr/bin/notes", 0o644)
	write("etc/alternatives/awk", 0o755)
	// Absolute links, as images have them: they must resolve in the root.
	for link, target := range map[string]string{"bin": "/usr/bin", "usr/bin/awk": "/etc/alternatives/awk", "usr/bin/sh": "/bin/sh"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for program, want := range map[string]string{
		"fio": "/usr/bin/fio", "awk": "/usr/bin/awk", "/bin/fio": "/bin/fio",
		"notes": "", "sysbench": "", "sh": "", "": "",
	} {
		got, ok := LookPath(root, program)
		if got != want || ok != (want != "") {
			t.Errorf("LookPath(%q) = %q, %v; want %q", program, got, ok, want)
		}
	}
}
