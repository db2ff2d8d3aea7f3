package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// smallFS mounts a tmpfs of the given size for the results database, so
// that a test can fill it as a user's disk fills.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	testutil.RequiresRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Error(err)
			}
			return
		}
	}
}

// freeAtTeardown frees the disk when the run's teardown starts, as the
// removal of a run's state directory on the same disk would.
type freeAtTeardown struct {
	nopObserver
	path string
}

func (o freeAtTeardown) TeardownStarted(int64) func(error) {
	os.Remove(o.path)
	return func(error) {}
}

// fullDiskRun runs the fake scenario with its database on a small file
// system that fills up when the fifth tool starts: the warm-ups of the
// three guests and the first measured step are stored by then. With
// freeAtEnd, the teardown frees the disk again.
func fullDiskRun(t *testing.T, freeAtEnd bool) (id int64, runErr error, opts Options, execs int) {
	dir := smallFS(t, "2m")
	plan, opts := setup(t)
	st, err := store.Open(filepath.Join(dir, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.Store = st
	filler := filepath.Join(dir, "filler")
	if freeAtEnd {
		opts.Observer = freeAtTeardown{path: filler}
	}
	fake.OnExec(func(string) {
		execs++
		if execs == 5 {
			fill(t, filler)
		}
	})
	id, runErr = Run(context.Background(), plan, opts)
	return id, runErr, opts, execs
}

func TestFullDiskStopsTheRunAndKeepsWhatItMeasured(t *testing.T) {
	id, err, opts, execs := fullDiskRun(t, true)
	if !errors.Is(err, ErrStore) {
		t.Fatalf("err = %v, want ErrStore", err)
	}
	if execs != 5 {
		t.Errorf("%d steps ran, want 5: the run must stop at the first refused step", execs)
	}
	ctx := context.Background()
	run, _ := opts.Store.GetRun(ctx, id)
	if run.Status != store.StatusFailed || !strings.Contains(run.StatusReason, "full") || run.Finished.IsZero() {
		t.Fatalf("run = %s (%q), finished %v; want failed, saying the disk is full", run.Status, run.StatusReason, run.Finished)
	}
	// The first measured step's sample, and the refused one's, stored once
	// the teardown freed the disk.
	if samples, _ := opts.Store.Samples(ctx, id); len(samples) != 2 {
		t.Fatalf("%d samples, want 2", len(samples))
	}
	assertNoState(t, opts.StateRoot)
}

func TestDiskThatStaysFullIsReportedAndLosesNothingStored(t *testing.T) {
	id, err, opts, _ := fullDiskRun(t, false)
	if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "1 samples and 0 failure records") {
		t.Fatalf("err = %v, want ErrStore and what could not be stored", err)
	}
	ctx := context.Background()
	if samples, _ := opts.Store.Samples(ctx, id); len(samples) != 1 {
		t.Fatalf("%d samples, want the 1 stored before the disk filled", len(samples))
	}
	// Its end could not be written: a later command marks it aborted
	// once this process, its owner, is gone.
	run, _ := opts.Store.GetRun(ctx, id)
	if run.Status != store.StatusRunning || run.Owner.PID != os.Getpid() {
		t.Fatalf("run = %s owned by %d; want running, owned by this process", run.Status, run.Owner.PID)
	}
	assertNoState(t, opts.StateRoot)
}
