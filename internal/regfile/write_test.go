package regfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// entries lists dir's names, temporary files included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A kept file is refused by what it is, not by how it is named: another
// spelling, a hard link and a symbolic link all reach it.
func TestReplaceRefusesAKeptFileByAnyName(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	mustWrite(t, db, "SQLite format 3\x00data")
	if err := os.Link(db, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("results.db", filepath.Join(dir, "soft")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := entries(t, dir)
	for _, name := range []string{db, filepath.Join(dir, "hard"), filepath.Join(dir, "soft"), dir + "/sub/../results.db", dir + "//results.db"} {
		err := Replace(name, 0o666, []string{db}, writeString("report"))
		if !errors.Is(err, ErrProtected) {
			t.Errorf("%s: err = %v, want ErrProtected", name, err)
		}
		if err := CheckReplace(name, []string{db}); !errors.Is(err, ErrProtected) {
			t.Errorf("check %s: err = %v, want ErrProtected", name, err)
		}
	}
	if got := mustRead(t, db); got != "SQLite format 3\x00data" {
		t.Errorf("the kept file now holds %q", got)
	}
	if after := entries(t, dir); !slices.Equal(before, after) {
		t.Errorf("the directory held %q, now %q", before, after)
	}
}

// A named pipe, a device (through a symbolic link to it too) and a
// directory are refused without being opened: a pipe without a reader
// would block, and a rename would put a regular file where /dev/null was.
func TestReplaceRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	null := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(dir, "stdout")
	if err := os.Symlink("/proc/self/fd/1", stdout); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	before := entries(t, dir)
	for _, path := range []string{fifo, null, "/dev/null", sub} {
		called := false
		err := Replace(path, 0o666, nil, func(io.Writer) error { called = true; return nil })
		if !errors.Is(err, ErrNotRegular) || called {
			t.Errorf("%s: err = %v, written = %v; want ErrNotRegular before writing", path, err, called)
		}
	}
	if fi, err := os.Stat(stdout); err == nil && !fi.Mode().IsRegular() {
		if err := Replace(stdout, 0o666, nil, writeString("x")); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: err = %v, want ErrNotRegular", stdout, err)
		}
	}
	if fi, err := os.Lstat(null); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link to /dev/null is no longer one: %v, %v", fi, err)
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v, %v", fi, err)
	}
	if after := entries(t, dir); !slices.Equal(before, after) {
		t.Errorf("the directory held %q, now %q", before, after)
	}
}

// A write that fails, midway or at once, leaves what was there and nothing
// else: no empty file where a new one was asked for, no temporary file.
func TestReplaceLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.html")
	mustWrite(t, old, "the report before")
	broken := errors.New("render failed")
	for _, path := range []string{old, filepath.Join(dir, "new.html")} {
		err := Replace(path, 0o666, nil, func(w io.Writer) error {
			io.WriteString(w, "<html>half")
			return broken
		})
		if !errors.Is(err, broken) {
			t.Errorf("%s: err = %v, want the writer's", path, err)
		}
	}
	if got := mustRead(t, old); got != "the report before" {
		t.Errorf("the old file now holds %q", got)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"old.html"}) {
		t.Errorf("the directory holds %q, want only old.html", got)
	}
}

// A file is replaced whole, keeping its permissions; a symbolic link to a
// regular file stays a link and the file it names is replaced.
func TestReplaceWritesTheFileALinkNames(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	mustWrite(t, real, "old")
	if err := os.Chmod(real, 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if err := Replace(link, 0o666, nil, writeString("new")); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, real); got != "new" {
		t.Errorf("the file holds %q, want new", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer one: %v, %v", fi, err)
	}
	if fi, err := os.Stat(real); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode is %v (%v), want 0640", fi.Mode(), err)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"link.json", "real.json"}) {
		t.Errorf("the directory holds %q", got)
	}
}

// A file that cannot be created is named in the error as asked for, not
// by the temporary name it would have been written under.
func TestReplaceNamesTheFileAskedFor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "r.html")
	err := Replace(path, 0o666, nil, writeString("x"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != path || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want a PathError of %s", err, path)
	}
}
