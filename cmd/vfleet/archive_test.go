package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// finishRuns ends the runs storeRuns left running.
func finishRuns(t *testing.T, c *cli, ids ...int64) {
	t.Helper()
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range ids {
		if err := st.FinishRun(context.Background(), id, store.StatusComplete, "", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExportImportThroughTheCLI(t *testing.T) {
	a := storeRuns(t, quickText, otherText, quickEdited)
	finishRuns(t, a, 1, 2)
	b := &cli{t: t, bin: a.bin, db: filepath.Join(t.TempDir(), "b.db"), work: a.work}
	file := filepath.Join(a.work, "runs.vfr")

	// Usage errors change nothing and write nothing.
	for _, args := range [][]string{{"export", "1"}, {"export", "-o", file}, {"import"}} {
		if _, stderr, code := a.run(args...); code != 2 {
			t.Errorf("vfleet %q: exit %d, stderr %q; want 2", args, code, stderr)
		}
	}
	// Run 3 is still running: nothing is written, not even a part.
	if _, stderr, code := a.run("export", "1", "3", "-o", file); code != 1 || !strings.Contains(stderr, "still running") {
		t.Fatalf("export of a running run: exit %d, stderr %q", code, stderr)
	}
	if entries, _ := os.ReadDir(a.work); len(entries) != 0 {
		t.Fatalf("a refused export left %v", entries)
	}

	if _, stderr, code := a.run("export", "1", "2", "-o", file); code != 0 {
		t.Fatalf("export: exit %d, stderr %q", code, stderr)
	}
	// The file has the mode any file this umask makes has, not a
	// temporary file's 0600.
	created := filepath.Join(t.TempDir(), "created")
	if f, err := os.Create(created); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if got, want := fileMode(t, file), fileMode(t, created); got != want {
		t.Errorf("exported file of mode %v; want %v, as os.Create makes it", got, want)
	}
	imported := regexp.MustCompile(`(?m)^run k-[0-9a-f]+: imported as #1\nrun k-[0-9a-f]+: imported as #2\n$`)
	if stdout, stderr, code := b.run("import", file); code != 0 || !imported.MatchString(stdout) {
		t.Fatalf("import: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	present := regexp.MustCompile(`(?m)^run k-[0-9a-f]+: already present as #1\nrun k-[0-9a-f]+: already present as #2\n$`)
	if stdout, stderr, code := b.run("import", file); code != 0 || !present.MatchString(stdout) {
		t.Fatalf("import again: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	runs, _, _ := b.run("runs")
	if !strings.Contains(runs, "ORIGIN") || strings.Count(runs, "host:unnamed") != 2 {
		t.Fatalf("vfleet runs does not say where the imported runs come from:\n%s", runs)
	}

	// Exported again from the store it went to, the file is the same.
	stdout, stderr, code := b.run("export", "1", "2", "-o", "-")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || !bytes.Equal([]byte(stdout), want) {
		t.Fatalf("exported again: exit %d, stderr %q, %d bytes differ from the %d exported first", code, stderr, len(stdout), len(want))
	}
	// all is every run, in id order.
	if stdout, stderr, code := b.run("export", "all", "-o", "-"); code != 0 || !bytes.Equal([]byte(stdout), want) {
		t.Fatalf("export all: exit %d, stderr %q, %d bytes differ from the %d of runs 1 and 2", code, stderr, len(stdout), len(want))
	}

	// A truncated file: one line saying why, exit 1, the store unchanged.
	cut := filepath.Join(a.work, "cut.vfr")
	if err := os.WriteFile(cut, want[:len(want)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, bin: a.bin, db: filepath.Join(t.TempDir(), "c.db"), work: a.work}
	if stdout, stderr, code := c.run("import", cut); code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "cut.vfr: import: runs file is damaged") {
		t.Fatalf("import of a truncated file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, stderr, _ := c.run("runs"); stdout != "" || !strings.Contains(stderr, "no runs stored") {
		t.Fatalf("a refused import left runs:\n%s%s", stdout, stderr)
	}
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// An import into a database that cannot be written, and a listing of one
// on a full disk, say so, whatever command asked.
func TestReadOnlyAndFullDatabaseAreSaid(t *testing.T) {
	testutil.RequiresRoot(t)
	a := storeRunsOf(t, storedRun{quickText, "lab1", store.StatusComplete, []float64{100, 101, 99}})
	file := filepath.Join(a.work, "runs.vfr")
	if _, stderr, code := a.run("export", "1", "-o", file); code != 0 {
		t.Fatalf("export: exit %d, stderr %q", code, stderr)
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	b := &cli{t: t, bin: a.bin, db: filepath.Join(dir, "r.db"), work: a.work}
	if _, stderr, code := b.run("import", file); code != 0 {
		t.Fatalf("import: exit %d, stderr %q", code, stderr)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := b.run("import", file); code != 1 || !strings.Contains(stderr, "results database is read-only: read-only file system") || strings.Contains(stderr, "a run") {
		t.Errorf("import into a read-only database: exit %d, stderr %q", code, stderr)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT, ""); err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = fill.Write(make([]byte, 1<<16))
	}
	fill.Close()
	if _, stderr, code := b.run("runs"); code != 1 || !strings.Contains(stderr, "no space left for the results database on "+dir) {
		t.Errorf("runs on a full disk: exit %d, stderr %q", code, stderr)
	}
}
