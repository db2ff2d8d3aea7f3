package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// importedCLI is a CLI whose database holds the runs of the repository's
// own runs file: run 1 has values that are NaN and infinite, and figures
// that overflow.
func importedCLI(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	file, err := filepath.Abs("../../internal/archive/testdata/runs.vfr")
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := c.run("import", file); code != 0 {
		t.Fatalf("import: exit %d, %s", code, stderr)
	}
	return c
}

func listDir(t *testing.T, dir string) []string {
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

// No output flag writes over the results database, whatever name it is
// given, nor over what is not a regular file: each is refused as a usage
// error before anything is written, and a named pipe without a reader
// does not block.
func TestOutputNeverDestroysWhatItNames(t *testing.T) {
	c := importedCLI(t)
	db, err := os.ReadFile(c.db)
	if err != nil {
		t.Fatal(err)
	}
	w := func(name string) string { return filepath.Join(c.work, name) }
	if err := os.Link(c.db, w("hard.db")); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"soft.db": c.db, "null": os.DevNull, "stdout": "/proc/self/fd/1"} {
		if err := os.Symlink(to, w(link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(w("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(w("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, c.work)
	refused := [][]string{
		{"report", "1", "-o", c.db},
		{"report", "1", "--format", "html", "-o", c.db},
		{"compare", "1", "2", "-o", c.db},
		{"export", "all", "-o", c.db},
		{"export", "all", "-o", filepath.Dir(c.db) + "/./" + filepath.Base(c.db)},
		{"export", "all", "-o", w("hard.db")},
		{"export", "all", "-o", w("soft.db")},
		{"export", "all", "-o", w("fifo")},
		{"export", "all", "-o", w("null")},
		{"export", "all", "-o", w("stdout")},
		{"export", "all", "-o", w("dir")},
		{"report", "1", "-o", w("fifo")},
		{"audit", "--json", c.db},
		{"audit", "--json", w("null")},
	}
	for _, sibling := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(c.db + sibling); err == nil {
			refused = append(refused, []string{"export", "all", "-o", c.db + sibling})
		}
	}
	for _, args := range refused {
		if _, stderr, code := c.run(args...); code != exitUsage {
			t.Errorf("vfleet %q: exit %d, stderr %q; want %d", args, code, stderr, exitUsage)
		}
	}
	if after, err := os.ReadFile(c.db); err != nil || !bytes.Equal(after, db) {
		t.Errorf("the results database changed (%v)", err)
	}
	if _, stderr, code := c.run("runs"); code != 0 {
		t.Errorf("runs after the refusals: exit %d, %s", code, stderr)
	}
	if after := listDir(t, c.work); !slices.Equal(before, after) {
		t.Errorf("the directory held %q, now %q", before, after)
	}
	if fi, err := os.Lstat(w("null")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link to /dev/null was replaced: %v, %v", fi, err)
	}
	if fi, err := os.Stat(w("fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe was replaced: %v, %v", fi, err)
	}
}

// A report that fails after its file was begun leaves the file that was
// there, or none: never an empty one.
func TestFailedOutputLeavesNothing(t *testing.T) {
	c := importedCLI(t)
	old := filepath.Join(c.work, "old.html")
	if err := os.WriteFile(old, []byte("the page before"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{old, filepath.Join(c.work, "new.html")} {
		if _, stderr, code := c.run("report", "99", "--format", "html", "-o", out); code != exitFailed {
			t.Errorf("report of a missing run into %s: exit %d, %s", out, code, stderr)
		}
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != "the page before" {
		t.Errorf("the old page now holds %q (%v)", b, err)
	}
	if got := listDir(t, c.work); !slices.Equal(got, []string{"old.html"}) {
		t.Errorf("the directory holds %q, want only old.html", got)
	}
}

// Every format of report and compare renders every stored value, NaN and
// infinities included, and the JSON is JSON.
func TestEveryFormatRendersEveryStoredValue(t *testing.T) {
	c := importedCLI(t)
	var cmds [][]string
	for _, f := range []string{"table", "csv", "json", "html"} {
		cmds = append(cmds, []string{"report", "1", "--format", f})
	}
	for _, f := range []string{"table", "json", "html"} {
		cmds = append(cmds, []string{"compare", "1", "2", "--format", f}, []string{"compare", "2", "1", "--format", f})
	}
	for _, args := range cmds {
		stdout, stderr, code := c.run(args...)
		if code != 0 {
			t.Errorf("vfleet %q: exit %d, stderr %q", args, code, stderr)
			continue
		}
		if args[len(args)-1] == "json" && !json.Valid([]byte(stdout)) {
			t.Errorf("vfleet %q: not JSON:\n%s", args, stdout)
		}
	}
	stdout, _, _ := c.run("report", "1", "--format", "json")
	if !strings.Contains(stdout, `"non_finite": {`) {
		t.Errorf("the JSON report does not say what its nulls were:\n%s", stdout)
	}
}
