// Package guesttest is the conformance suite every guest kind passes: the
// same start, agent call, isolation, timeout, stop, double stop,
// cancellation and no-leak tests, so a kind cannot quietly differ from the
// others in how it behaves.
package guesttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/testutil"
)

// Options describe the kind under test.
type Options struct {
	Kind guest.Kind
	// Spec is a template; the suite sets the name.
	Spec guest.Spec
	// RootFS and AgentPath come from the guest image.
	RootFS, AgentPath string
	// Isolated says the guest has its own UTS namespace, so a process in it
	// sees the guest's name as its hostname.
	Isolated bool
}

// env returns a fresh run environment whose ledger must end empty.
func env(t *testing.T, o Options) guest.Env {
	t.Helper()
	root, led := testutil.Ledger(t)
	// The run's id names its cgroups and containers, which are the host's:
	// the pid keeps two packages' suites, run at once, apart.
	id := fmt.Sprintf("t%d%s", os.Getpid(), strings.ToLower(t.Name()[len(t.Name())-3:]))
	return guest.Env{RunID: id, RootFS: o.RootFS, AgentPath: o.AgentPath, StateDir: root + "/state", Ledger: led}
}

func newGuest(t *testing.T, o Options, name string) (guest.Guest, guest.Env) {
	t.Helper()
	e := env(t, o)
	spec := o.Spec
	spec.Name = name
	g, err := o.Kind.New(spec, e)
	if err != nil {
		t.Fatal(err)
	}
	return g, e
}

// Run runs the suite.
func Run(t *testing.T, o Options) {
	testutil.RequiresRoot(t)
	if err := o.Kind.Probe(context.Background(), o.Spec.Runtime); err != nil {
		t.Fatalf("probe: %v (the kind must work on the test host)", err)
	}
	t.Run("Lifecycle", func(t *testing.T) { lifecycle(t, o) })
	t.Run("BadRequests", func(t *testing.T) { badRequests(t, o) })
	t.Run("CancelledStart", func(t *testing.T) { cancelledStart(t, o) })
	t.Run("CancelDuringStart", func(t *testing.T) { cancelDuringStart(t, o) })
}

func lifecycle(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	g, e := newGuest(t, o, "conf-a")
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			g.Stop(ctx)
		}
	}()
	info := g.Info()
	if info.BootTime <= 0 || len(info.PIDs) == 0 || info.ScratchDir == "" || info.Kind != o.Kind.Name() {
		t.Errorf("info = %+v", info)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{o.AgentPath, "--version"}})
	if err != nil || !r.Succeeded() || !strings.Contains(string(r.Stdout), "vfleet-agent") {
		t.Fatalf("agent --version: %v %+v", err, r)
	}
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"hostname"}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("hostname: %v %+v", err, r)
	}
	if got := strings.TrimSpace(string(r.Stdout)); o.Isolated && got != "conf-a" {
		t.Errorf("process sees hostname %q, want the guest's name: not isolated", got)
	}
	// The identity files say what the kernel says, and resolve both
	// localhost and the guest's own name, as a container runtime's do.
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", `test "$(cat /etc/hostname)" = "$(hostname)" && getent hosts localhost "$(hostname)"`}})
	if err != nil || !r.Succeeded() || strings.Count(string(r.Stdout), "\n") != 2 {
		t.Errorf("identity files: %v %+v", err, r)
	}
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "touch probe && pwd"}, Dir: info.ScratchDir})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != info.ScratchDir {
		t.Errorf("scratch dir not writable: %v %+v", err, r)
	}
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sleep", "10"}, TimeoutMS: 200})
	if err != nil || !r.TimedOut {
		t.Errorf("timeout not enforced: %v %+v", err, r)
	}
	// A daemon leaves the agent's session and process group, and its
	// parent exits: only the guest's cgroup still holds it.
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", `setsid sh -c "sleep 3191" >/dev/null 2>&1 </dev/null & echo started`}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("daemon: %v %+v", err, r)
	}
	runCgroup := cgroup.PathOf(e.RunID, "")
	if len(testutil.RunningIn(t, runCgroup)) == 0 {
		t.Errorf("nothing of the guest runs in its run's cgroups (%s)", runCgroup)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if left := testutil.Outliving(func() []string { return testutil.RunningIn(t, runCgroup) }); len(left) > 0 {
		t.Errorf("still running after stop: %v", left)
	}
	if left := testutil.Outliving(func() []int { return testutil.RunningWithArgs(t, "sleep", "3191") }); len(left) > 0 {
		t.Errorf("the daemon outlived its guest: pids %v", left)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := g.Exec(ctx, agent.Request{Argv: []string{"true"}}); err == nil {
		t.Fatal("exec on a stopped guest succeeded")
	}
}

func badRequests(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	g, _ := newGuest(t, o, "conf-b")
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(ctx)
	_, err := g.Exec(ctx, agent.Request{Argv: []string{"/no/such/tool"}})
	if !errors.Is(err, agent.ErrRemote) {
		t.Fatalf("missing binary: err = %v, want ErrRemote", err)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "exit 7"}})
	if err != nil || r.ExitCode != 7 {
		t.Fatalf("exit status lost: %v %+v", err, r)
	}
}

func cancelledStart(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	g, _ := newGuest(t, o, "conf-c")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Start(ctx); err == nil {
		g.Stop(context.Background())
		t.Fatal("start with a cancelled context succeeded")
	}
}

func cancelDuringStart(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	for _, after := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond} {
		g, _ := newGuest(t, o, "conf-d")
		ctx, cancel := context.WithTimeout(context.Background(), after)
		err := g.Start(ctx)
		cancel()
		// Either outcome is fine; what matters is that nothing is left.
		if stopErr := g.Stop(context.Background()); stopErr != nil {
			t.Errorf("stop after a start interrupted at %s (start err %v): %v", after, err, stopErr)
		}
	}
}
