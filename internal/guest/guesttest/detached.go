package guesttest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

// launchEnv carries a detached launch's request to the test binary run
// again as the process that starts the guest and exits.
const launchEnv = "VFLEET_GUESTTEST_LAUNCH"

// launchTimeout bounds a detached launch: a VM emulated under TCG boots
// in tens of seconds.
const launchTimeout = 5 * time.Minute

// launch is a detached launch's request, and launched what it says back.
type launch struct {
	Kind, RunID, RootFS, AgentPath, StateDir string
	Spec                                     guest.Spec
	LedgerRoot                               string // the launching process makes the run's ledger there
	Out                                      string // where launched is written
}

type launched struct {
	Info guest.Info
	// Addr is where a later process reaches the agent: Info.AgentAddr, or
	// the VM's one-client channel that `vfleet fleet exec` takes once
	// `fleet up` has exited.
	Addr string
}

// Main is the TestMain of a package that runs the suite: run again with a
// detached launch's request, the test binary is the process that starts
// the guest and exits, as `vfleet fleet up` does.
func Main(m *testing.M) {
	if req := os.Getenv(launchEnv); req != "" {
		if err := launchDetached(req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testutil.Main(m)
}

// launchDetached starts the guest with a ledger of its own and returns
// without stopping it: the guest must outlive this process.
func launchDetached(req string) error {
	var l launch
	if err := json.Unmarshal([]byte(req), &l); err != nil {
		return fmt.Errorf("detached launch: %w", err)
	}
	k, err := guest.Lookup(l.Kind)
	if err != nil {
		return err
	}
	led, err := ledger.Create(l.LedgerRoot, l.RunID)
	if err != nil {
		return err
	}
	defer led.Close()
	g, err := k.New(l.Spec, guest.Env{RunID: l.RunID, RootFS: l.RootFS, AgentPath: l.AgentPath, StateDir: l.StateDir, Ledger: led, Detached: true})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		return err
	}
	info := g.Info()
	b, err := json.Marshal(launched{Info: info, Addr: cmp.Or(info.AgentAddr, info.Details["agent_socket"])})
	if err != nil {
		return err
	}
	return os.WriteFile(l.Out, b, 0o600)
}

// detached starts a guest as a fleet does, from a process that exits once
// it is up; the guest must still answer there, through a new client, and
// undoing its ledger, as `vfleet fleet down` does, must leave nothing.
func detached(t *testing.T, o Options) {
	if _, err := o.Kind.New(o.spec("conf-e"), guest.Env{Detached: true}); errors.Is(err, guest.ErrNotDetachable) {
		// Refused before anything starts, saying why: what a fleet of the
		// kind gets.
		t.Logf("the kind refuses detached guests: %v", err)
		return
	}
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root := t.TempDir()
	l := launch{Kind: o.Kind.Name(), RunID: testutil.RunID(t), RootFS: o.RootFS, AgentPath: o.AgentPath, StateDir: root + "/state",
		Spec: o.spec("conf-e"), LedgerRoot: root, Out: root + "/launched.json"}
	req, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever the launch left, even after a failure, is undone.
	down := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := ledger.CleanRun(ctx, root, l.RunID, ledger.CleanOptions{})
		return err
	}
	defer func() {
		if err := down(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout+time.Minute)
	defer cancel()
	// The launcher's output goes to a file: a pipe could be held open by
	// the guest it leaves running.
	logf, err := os.Create(root + "/launch.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), launchEnv+"="+string(req))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		t.Fatalf("detached launch: %v\n%s", err, out)
	}
	b, err := os.ReadFile(l.Out)
	if err != nil {
		t.Fatalf("the detached launch said nothing (%v): does the test package's TestMain call guesttest.Main?", err)
	}
	var up launched
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatal(err)
	}
	if up.Addr == "" {
		t.Fatalf("a detached guest names no address to reach its agent at: info %+v", up.Info)
	}
	// Right after its launcher left, as a fleet's next command comes: a
	// VM's guest may not have seen the launcher go, and its agent, still
	// in that session, is asked for its hello.
	dctx, cancel := context.WithTimeout(ctx, helloWait)
	c, err := agent.Dial(dctx, up.Addr)
	cancel()
	if err != nil {
		t.Fatalf("the detached guest's agent, once its launcher exited: %v", err)
	}
	r, err := c.Do(ctx, agent.Request{Argv: []string{"hostname"}})
	c.Close()
	if err != nil || !r.Succeeded() || strings.TrimSpace(string(r.Stdout)) == "" {
		t.Errorf("exec in the detached guest: %v %+v", err, r)
	}
	if err := down(); err != nil {
		t.Fatal(err)
	}
	runCgroup := cgroup.PathOf(l.RunID, "")
	if left := testutil.Outliving(func() []string { return testutil.RunningIn(t, runCgroup) }); len(left) > 0 {
		t.Errorf("still running after its ledger was undone: %v", left)
	}
	if _, err := os.Stat(root + "/" + l.RunID); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ledger of the detached guest is still there (%v)", err)
	}
}

// helloWait bounds the wait for the agent's hello on a re-attach: the
// agent is up already, and a lost hello is asked for after a second.
const helloWait = 5 * time.Second
