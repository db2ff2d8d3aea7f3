package testutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/cgroup"
)

func TestMountPointsRecorded(t *testing.T) {
	points, err := MountPoints("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 6 || points[0] != "/proc" || points[5] != "/var/lib/with space" {
		t.Fatalf("points = %q", points)
	}
}

// The leak check must be able to fail: a child started after the snapshot
// is reported until it is gone.
func TestLeakCheckSeesNewChildren(t *testing.T) {
	before := TakeSnapshot(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if leaks := Leaks(t, before); !slices.Contains(leaks, fmt.Sprintf("process %d (sleep)", cmd.Process.Pid)) {
		t.Fatalf("leaks = %q, want the live child among them", leaks)
	}
	if leaks := added("x", map[string]bool{"a": true}, map[string]bool{"a": true, "b": true}); len(leaks) != 1 || leaks[0] != "x b" {
		t.Fatalf("added = %q", leaks)
	}
	cmd.Process.Kill()
	cmd.Wait()
	CheckLeaks(t, before)
}

// A process a guest left in its cgroup is a leak whoever its parent is,
// whatever it runs.
func TestLeakCheckSeesProcessesInVfleetCgroups(t *testing.T) {
	RequiresRoot(t)
	before := TakeSnapshot(t)
	_, led := Ledger(t)
	path := cgroup.PathOf("t-leaks-"+strconv.Itoa(os.Getpid()), "g")
	entry, err := led.Record(cgroup.Kind, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cgroup.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// A test that fails half-way must not leave its sleep to the next run.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cgroup.Kill(ctx, path)
		cgroup.Remove(path)
	})
	sleep := SleepArg(3183)
	cmd := exec.Command("sh", "-c", `setsid sleep `+sleep+` >/dev/null 2>&1 </dev/null &`)
	if err := g.Start(cmd, cmd.Start); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The shell is gone once its child forked, maybe before the child
	// runs sleep: a busy machine shows it a moment later.
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); len(sleeps) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		sleeps = RunningWithArgs(t, "sleep", sleep)
	}
	if len(sleeps) != 1 {
		t.Fatalf("sleeps running: %v", sleeps)
	}
	want := fmt.Sprintf("process %d (sleep) in cgroup %s", sleeps[0], path)
	if leaks := Leaks(t, before); !slices.Contains(leaks, want) {
		t.Errorf("leaks = %q, want %q among them", leaks, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cgroup.Kill(ctx, path); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := led.Done(entry); err != nil {
		t.Fatal(err)
	}
	CheckLeaks(t, before)
}

// A test process killed half-way (go test's -timeout) leaves its ledger in
// the test state root: the next test process to take the machine undoes
// what it holds and removes it.
func TestKilledTestProcessesLedgerIsUndone(t *testing.T) {
	if os.Getenv("VFLEET_TEST_KILLED_CHILD") != "" {
		_, led := Ledger(t)
		path := cgroup.PathOf("t-killed-"+strconv.Itoa(os.Getpid()), "g")
		if _, err := led.Record(cgroup.Kind, path, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := cgroup.Create(path); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ledger %s\n", led.Dir())
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	RequiresRoot(t)
	before := TakeSnapshot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledTestProcessesLedgerIsUndone$")
	cmd.Env = append(os.Environ(), "VFLEET_TEST_KILLED_CHILD=1")
	out, _ := cmd.Output()
	var dir string
	if _, err := fmt.Sscanf(string(out), "ledger %s", &dir); err != nil {
		t.Fatalf("the child did not make its ledger: %q", out)
	}
	group := cgroup.PathOf("t-killed-"+strconv.Itoa(cmd.Process.Pid), "g")
	made := func() (found []string) {
		for c := range vfleetCgroups() {
			if strings.HasSuffix(c, group) {
				found = append(found, c)
			}
		}
		return found
	}
	if len(made()) == 0 {
		t.Fatalf("the killed child's cgroup %s is not there", group)
	}
	undoKilledTestsNow()
	if left := made(); len(left) > 0 {
		t.Errorf("left by the killed child: %v", left)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Errorf("the killed child's ledger %s: %v, want it removed", filepath.Dir(dir), err)
	}
	CheckLeaks(t, before)
}

// A test that shares the machine counts what carries its names, not what
// another test beside it makes meanwhile.
func TestSharedLeakCheckCountsItsOwnNames(t *testing.T) {
	SharesMachine(t)
	RequiresRoot(t)
	before := TakeSnapshot(t)
	own, other := cgroup.PathOf(RunID(t), "g"), cgroup.PathOf("t-other-"+strconv.Itoa(os.Getpid()), "g")
	for _, p := range []string{own, other} {
		if _, err := cgroup.Create(p); err != nil {
			t.Fatal(err)
		}
		defer cgroup.Remove(p)
	}
	leaks := strings.Join(Leaks(t, before), "\n")
	if !strings.Contains(leaks, own) || strings.Contains(leaks, other) {
		t.Errorf("leaks = %q, want %s and not %s", leaks, own, other)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if leaks := Leaks(t, before); !slices.Contains(leaks, fmt.Sprintf("process %d (sleep)", cmd.Process.Pid)) {
		t.Errorf("leaks = %q, want the test's own child among them", leaks)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := cgroup.Remove(own); err != nil {
		t.Fatal(err)
	}
	CheckLeaks(t, before)
}

// Tests that share the machine hold it together; a test that holds it
// alone waits for them.
func TestSharedHoldsMeetAndExcludeAloneOnes(t *testing.T) {
	if mode := os.Getenv("VFLEET_TEST_HOLD_CHILD"); mode != "" {
		if mode == "shared" {
			SharesMachine(t)
		}
		RequiresRoot(t)
		fmt.Println("held")
		time.Sleep(30 * time.Second)
		return
	}
	SharesMachine(t)
	RequiresRoot(t)
	held := func(mode string, within time.Duration) bool {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedHoldsMeetAndExcludeAloneOnes$")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, machineHeldEnv+"=") }),
			"VFLEET_TEST_HOLD_CHILD="+mode)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		said := make(chan bool, 1)
		go func() {
			b := make([]byte, 4)
			n, _ := io.ReadFull(out, b)
			said <- string(b[:n]) == "held"
		}()
		select {
		case ok := <-said:
			return ok
		case <-time.After(within):
			return false
		}
	}
	if !held("shared", time.Minute) {
		t.Error("a test process that shares the machine waited for this one, which shares it too")
	}
	if held("alone", 2*time.Second) {
		t.Error("a test process took the machine alone while this one held it")
	}
}
