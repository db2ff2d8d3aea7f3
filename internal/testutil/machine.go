package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

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
// The hold is a flock, so it goes with a test process that dies; within a
// process it is counted, so that a test's subtests and helpers (which call
// RequiresRoot again) take it without waiting on themselves. A test process
// that a holding test starts (the test binary run again as the process to
// kill, say) holds it through its parent, which waits for it.
var machine struct {
	sync.Mutex
	held int
	f    *os.File
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
		f, err := os.OpenFile(machineLockFile(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatalf("hold the machine for integration tests: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("hold the machine for integration tests: flock %s: %v", f.Name(), err)
		}
		machine.f = f
		os.Setenv(machineHeldEnv, strconv.Itoa(os.Getpid()))
	}
	machine.held++
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
