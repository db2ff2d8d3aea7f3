package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	// from is when this process took the machine, waited how long it
	// waited for it: what VFLEET_TEST_MACHINE_LOG records.
	from   time.Time
	waited time.Duration
	// shared is whether the test that holds it, or is about to, shares it
	// (SharesMachine): a test's helpers hold it the way the test does.
	shared bool
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
	if machine.held == 0 {
		asked := time.Now()
		f, err := os.OpenFile(machineLockFile(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatalf("hold the machine for integration tests: %v", err)
		}
		how := unix.LOCK_EX
		if machine.shared {
			how = unix.LOCK_SH
		}
		if err := unix.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			t.Fatalf("hold the machine for integration tests: flock %s: %v", f.Name(), err)
		}
		machine.f = f
		machine.from = time.Now()
		machine.waited = machine.from.Sub(asked)
		os.Setenv(machineHeldEnv, strconv.Itoa(os.Getpid()))
		// Before the test's leak snapshot, so that what is undone is not
		// taken for the test's own work.
		undoKilledTests()
	}
	machine.held++
	t.Cleanup(func() {
		machine.Lock()
		defer machine.Unlock()
		if machine.held--; machine.held == 0 {
			logHold(t.Name(), machine.shared, machine.waited, time.Since(machine.from))
			os.Unsetenv(machineHeldEnv)
			machine.f.Close()
			machine.f = nil
		}
	})
}

// SharesMachine lets the test hold the machine beside other tests that
// share it, in other test processes: its leak check then counts only what
// carries a name it made (ScopeLeaks, RunID, Ledger) and its own children.
// What cannot be told apart by name (orphans adopted by init, mounts
// outside a run's state, devices in this host's namespace without an
// alias naming the run) is left to the tests that hold the machine alone:
// one that kills vfleet, or measures, or makes such things, does not
// share it. It must come
// before anything that holds the machine (RequiresRoot, TakeSnapshot and
// the fixtures).
func SharesMachine(t testing.TB) {
	t.Helper()
	machine.Lock()
	defer machine.Unlock()
	if machine.held > 0 {
		t.Fatal("SharesMachine after the test held the machine alone")
	}
	machine.shared = true
	t.Cleanup(func() {
		machine.Lock()
		defer machine.Unlock()
		machine.shared = false
	})
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
	f, err := os.OpenFile(machineLockFile(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("hold the machine: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("hold the machine: flock %s: %w", f.Name(), err)
	}
	return fn()
}

// logHold appends a line for a test's hold of the machine to the file
// VFLEET_TEST_MACHINE_LOG names, if any: the suite's wall time is about the
// sum of the holds, so that is where shortening a test shortens the suite,
// and a test's own elapsed time (which counts its wait) does not say it.
func logHold(test string, shared bool, waited, held time.Duration) {
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
	mode := "alone"
	if shared {
		mode = "shared"
	}
	fmt.Fprintf(f, "%s\t%s\t%.1f\t%.1f\t%s\n", filepath.Base(wd), test, waited.Seconds(), held.Seconds(), mode)
}
