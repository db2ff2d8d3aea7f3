package cgroup_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/testutil"
)

// A daemon that leaves its parent's session and process group is still in
// the group, and releasing the group's ledger entry kills it and removes
// the group, as `vfleet clean` does after a crash.
func TestReleaseKillsADaemonStartedInTheGroup(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	_, led := testutil.Ledger(t)
	path := cgroup.PathOf("t-"+strconv.Itoa(os.Getpid()), "daemon")
	entry, err := led.Record(cgroup.Kind, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cgroup.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sleep := testutil.SleepArg(3181)
	cmd := exec.Command("sh", "-c", `setsid sh -c "sleep `+sleep+`" >/dev/null 2>&1 </dev/null & echo started`)
	if err := g.Start(cmd, cmd.Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The shell is gone once it forked the daemon, maybe before the daemon
	// runs sleep: a busy machine shows it a moment later.
	running := func() bool {
		return len(testutil.RunningIn(t, path)) > 0 && len(testutil.RunningWithArgs(t, "sleep", sleep)) > 0
	}
	for deadline := time.Now().Add(5 * time.Second); !running() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if !running() {
		t.Fatal("the daemon is not running in the group")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := led.Release(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if left := testutil.Outliving(func() []int { return testutil.RunningWithArgs(t, "sleep", sleep) }); len(left) > 0 {
		t.Errorf("the daemon survived its group: %v", left)
	}
	testutil.CheckLeaks(t, before)
}

// Without cgroup.kill (cgroup v1) every process is killed one by one while
// the group is frozen, until none is left, however fast they fork.
func TestDrainKillsAForkingGroupUnderV1(t *testing.T) {
	testutil.RequiresRoot(t)
	mounts, err := cgroup.Mounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	freezer := ""
	for _, m := range mounts {
		if m.Freezer {
			freezer = m.Dir
		}
	}
	if freezer == "" {
		t.Skip("no cgroup v1 freezer mounted")
	}
	before := testutil.TakeSnapshot(t)
	_, led := testutil.Ledger(t)
	path := cgroup.PathOf("t-"+strconv.Itoa(os.Getpid()), "v1")
	entry, err := led.Record(cgroup.Kind, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(freezer, path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cgroup.Remove(path) })
	// The loop waits for a line on its input, so that it is in the group
	// before it forks anything.
	cmd := exec.Command("sh", "-c", `read go; exec timeout 20 sh -c 'while :; do setsid sleep 3182 & sleep 0.01; done'`)
	release, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	for len(testutil.RunningWithArgs(t, "sleep", "3182")) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cgroup.Drain(ctx, dir, false, dir); err != nil {
		t.Fatal(err)
	}
	<-exited
	if pids, err := cgroup.Procs(dir); err != nil || len(pids) > 0 {
		t.Fatalf("left in the group: %v, %v", pids, err)
	}
	if err := cgroup.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := led.Done(entry); err != nil {
		t.Fatal(err)
	}
	testutil.CheckLeaks(t, before)
}
