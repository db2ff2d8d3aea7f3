package treetar

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A pushed root file system must arrive as it is: hard links as links
// (not twice the bytes), symbolic links as links, owners by number (the
// peer's names may differ), and only the entries asked for.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "rootfs", "bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "rootfs", "bin", "a"), []byte("program"), 0o755))
	must(os.Link(filepath.Join(dir, "rootfs", "bin", "a"), filepath.Join(dir, "rootfs", "bin", "b")))
	must(os.Symlink("bin/a", filepath.Join(dir, "rootfs", "c")))
	must(os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "left-out"), []byte("x"), 0o644))

	var buf bytes.Buffer
	must(Write(&buf, dir, []string{"manifest.json", "rootfs"}))
	got := map[string]*tar.Header{}
	r := tar.NewReader(&buf)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(err)
		got[h.Name] = h
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner names %q:%q; want numbers only", h.Name, h.Uname, h.Gname)
		}
	}
	if len(got) != 6 {
		t.Errorf("entries %v; want manifest.json, rootfs/, rootfs/bin/, its two names of a, rootfs/c", keys(got))
	}
	a, b := got["rootfs/bin/a"], got["rootfs/bin/b"]
	if a == nil || b == nil || a.Typeflag != tar.TypeReg || a.Size != 7 || b.Typeflag != tar.TypeLink || b.Linkname != "rootfs/bin/a" {
		t.Errorf("hard link: a %+v, b %+v; want a the file, b a link to it", a, b)
	}
	if c := got["rootfs/c"]; c == nil || c.Typeflag != tar.TypeSymlink || c.Linkname != "bin/a" {
		t.Errorf("symbolic link: %+v", c)
	}
	if d := got["rootfs/"]; d == nil || d.Typeflag != tar.TypeDir {
		t.Errorf("directory: %+v", d)
	}
}

func keys(m map[string]*tar.Header) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
