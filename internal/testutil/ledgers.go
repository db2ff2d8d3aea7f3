package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Ledger is a run's ledger, named "t", in a directory of its own, root,
// which must be empty when the test ends: whatever a test's guests
// recorded, they removed.
//
// root is under the test state root rather than the test's temporary
// directory so that a test process killed half-way (go test's -timeout
// does that) leaves its ledger where the next test process to take the
// machine finds it and undoes what it recorded (see undoKilledTests).
func Ledger(t testing.TB) (root string, led *ledger.Ledger) {
	t.Helper()
	root = filepath.Join(testRunsDir(), fmt.Sprintf("%d-%d", os.Getpid(), ledgerSeq.Add(1)))
	led, err := ledger.Create(root, "t")
	if err != nil {
		t.Fatal(err)
	}
	// What a test keeps below it (a guest's state directory) is its own.
	ScopeLeaks(t, func() []string { return []string{root + "/"} })
	t.Cleanup(func() {
		led.Close()
		if p := led.Pending(); len(p) > 0 {
			// Kept for the next test process to undo once this one is gone.
			t.Errorf("ledger still holds %d entries: %v", len(p), p)
			return
		}
		if err := os.RemoveAll(root); err != nil {
			t.Error(err)
		}
	})
	return root, led
}

var ledgerSeq atomic.Int64

// testRunsDir holds one directory per Ledger, named "PID-N" after the test
// process that made it.
func testRunsDir() string { return filepath.Join(StateRoot(), "ledgers") }

var undoKilled sync.Once

// undoKilledTests undoes what the ledgers of test processes that are gone
// still hold, once per test process, when it first takes the machine: a
// leftover cgroup or namespace would otherwise stay on the machine for
// good, since no test looks at another's ledger. Entries of a kind this
// test binary cannot undo (its package does not link the kind's package)
// stay for one that can.
func undoKilledTests() { undoKilled.Do(undoKilledTestsNow) }

func undoKilledTestsNow() {
	runs, err := os.ReadDir(testRunsDir())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range runs {
		pid, _, ok := strings.Cut(r.Name(), "-")
		if !ok || !r.IsDir() || pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil {
			if p, err := procfs.Find(n); err == nil && p.Alive() {
				continue
			}
		}
		dir := filepath.Join(testRunsDir(), r.Name())
		removed, err := ledger.CleanRun(ctx, dir, "t", ledger.CleanOptions{})
		for _, rm := range removed {
			outcome := "undone"
			if rm.Err != nil {
				outcome = rm.Err.Error()
			}
			fmt.Fprintf(os.Stderr, "testutil: left by killed test process %s: %s: %s\n", pid, rm.Entry.Describe(), outcome)
		}
		if err != nil {
			if !errors.Is(err, ledger.ErrOwnerAlive) {
				fmt.Fprintf(os.Stderr, "testutil: a killed test process's ledger %s: %v\n", dir, err)
			}
			continue
		}
		os.RemoveAll(dir)
	}
}
