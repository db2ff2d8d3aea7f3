package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The integration tests of every package take the machine in turn, while
// unit tests and builds need not wait: a leak check looks at the whole
// machine (mounts, network namespaces and links, cgroups, processes), so
// another package's integration test running beside it would be taken for
// a leak. With the machine held by one test process at a time, go test can
// run packages side by side (-p), a package's build and unit tests beside
// another's integration tests.
//
// A test whose leak check looks only at what it made (SharesMachine) holds
// the machine shared, beside other such tests of other test processes,
// while a test whose check looks at the whole machine holds it alone.
//
// The hold is a flock, so it goes with a test process that dies; within a
// process it is counted, so that a test's subtests and helpers (which call
// RequiresRoot again) take it without waiting on themselves. A test process
// that a holding test starts (the test binary run again as the process to
// kill, say) holds it through its parent, which waits for it.
var machine struct {
	sync.Mutex
	held int
	f    *os.File
	how  int // unix.LOCK_SH or unix.LOCK_EX, while held
	// sharing are the tests that share the machine (SharesMachine), by
	// top-level name: a test's subtests and helpers hold it as it does,
	// and tests that share it may run in parallel within a process.
	sharing map[string]bool
	// turns are the tests holding it, by top-level name: since when,
	// after waiting how long, what VFLEET_TEST_MACHINE_LOG records.
	turns map[string]turn
}

type turn struct {
	from   time.Time
	waited time.Duration
}

// topLevel is the name of the top-level test t is or is below.
func topLevel(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// machineHeldEnv is set, while a test holds the machine, for the processes
// it starts; heldByParent is whether this process was started so.
const machineHeldEnv = "VFLEET_TEST_MACHINE_HELD"

var heldByParent = os.Getenv(machineHeldEnv) != ""

// machineLockFile is where test processes meet: the same path for all of
// them, on a file system that goes with a reboot where there is one.
func machineLockFile() string {
	if fi, err := os.Stat("/run/lock"); err == nil && fi.IsDir() {
		return "/run/lock/vfleet-tests.lock"
	}
	return filepath.Join(os.TempDir(), "vfleet-tests.lock")
}

// holdMachine makes the test the machine's until it ends, waiting for the
// integration tests of other test processes to end first.
func holdMachine(t testing.TB) {
	t.Helper()
	if heldByParent {
		return
	}
	machine.Lock()
	defer machine.Unlock()
	test := topLevel(t)
	how := unix.LOCK_EX
	if machine.sharing[test] {
		how = unix.LOCK_SH
	}
	asked := time.Now()
	if machine.held == 0 {
		f, err := os.OpenFile(machineLockFile(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatalf("hold the machine for integration tests: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			t.Fatalf("hold the machine for integration tests: flock %s: %v", f.Name(), err)
		}
		machine.f, machine.how = f, how
		os.Setenv(machineHeldEnv, strconv.Itoa(os.Getpid()))
		// Before the test's leak snapshot, so that what is undone is not
		// taken for the test's own work.
		undoKilledTests()
	} else if how != machine.how {
		// Only tests that share the machine run in parallel.
		t.Fatalf("%s holds the machine %s while another test of this process holds it %s", test, holdName(how), holdName(machine.how))
	}
	machine.held++
	if _, ok := machine.turns[test]; !ok {
		if machine.turns == nil {
			machine.turns = map[string]turn{}
		}
		now := time.Now()
		machine.turns[test] = turn{from: now, waited: now.Sub(asked)}
		t.Cleanup(func() {
			machine.Lock()
			defer machine.Unlock()
			tn := machine.turns[test]
			delete(machine.turns, test)
			logHold(test, machine.sharing[test], tn.from, tn.waited, time.Since(tn.from))
		})
	}
	t.Cleanup(func() {
		machine.Lock()
		defer machine.Unlock()
		if machine.held--; machine.held == 0 {
			os.Unsetenv(machineHeldEnv)
			machine.f.Close()
			machine.f = nil
		}
	})
}

func holdName(how int) string {
	if how == unix.LOCK_SH {
		return "shared"
	}
	return "alone"
}

// SharesMachine lets the test hold the machine beside other tests that
// share it, in other test processes or, with t.Parallel, in its own: its
// leak check then counts only what carries a name it made (ScopeLeaks,
// RunID, Ledger) and its own children (while no other test of its process
// runs in parallel). What cannot be told apart by name (orphans adopted
// by init, mounts outside a run's state, devices in this host's namespace
// without an alias naming the run) is left to the tests that hold the
// machine alone: one that kills vfleet, or measures, or makes such
// things, does not share it. It must come before anything that holds the
// machine (RequiresRoot, TakeSnapshot and the fixtures).
func SharesMachine(t testing.TB) {
	t.Helper()
	machine.Lock()
	defer machine.Unlock()
	test := topLevel(t)
	if _, ok := machine.turns[test]; ok && !machine.sharing[test] {
		t.Fatal("SharesMachine after the test held the machine alone")
	}
	if machine.sharing == nil {
		machine.sharing = map[string]bool{}
	}
	machine.sharing[test] = true
}

// withMachine runs fn holding the machine, outside any test: what a
// package's last test leaves to the end of its process (a daemon its tests
// shared, which another package's test may have found answering and be
// using) is stopped between other test processes' integration tests, not
// under one.
func withMachine(fn func() error) error {
	if heldByParent {
		return fn()
	}
	f, err := flockFile(machineLockFile(), unix.LOCK_EX)
	if err != nil {
		return fmt.Errorf("hold the machine: %w", err)
	}
	defer f.Close()
	return fn()
}

// logHold appends a line for a test's hold of the machine to the file
// VFLEET_TEST_MACHINE_LOG names, if any: a hold alone stops every other
// integration test, so the sum of those is where shortening a test
// shortens the suite most, and a test's own elapsed time (which counts its
// wait) does not say it. The turn's start, in seconds since the epoch, lays
// the turns of a run's test processes on one timeline.
func logHold(test string, shared bool, from time.Time, waited, held time.Duration) {
	name := os.Getenv("VFLEET_TEST_MACHINE_LOG")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	wd, _ := os.Getwd()
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	fmt.Fprintf(f, "%s\t%s\t%.1f\t%.1f\t%s\t%.1f\n", filepath.Base(wd), test, waited.Seconds(), held.Seconds(), holdName(how), float64(from.UnixMilli())/1000)
}
