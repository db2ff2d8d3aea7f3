// Package guesttest is the conformance suite every guest kind passes: the
// same start, agent call, isolation, timeout, stop, double stop,
// cancellation and no-leak tests, what the kind's traits claim, each of
// its security profiles and a detached launch, so a kind cannot quietly
// differ from the others in how it behaves. It asks the kind for nothing
// but what the registry has: its Probe, its Traits, and its
// guest.Conformable spec if it has one.
package guesttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
	// RootFS and AgentPath come from the guest image.
	RootFS, AgentPath string
	// Runtime is the runtime the guests run under (guest.Runtimed);
	// empty for the kind's default.
	Runtime string
	// Own are fields every guest of the suite is given: where a kind
	// whose guests run elsewhere (guest.Traits.Elsewhere) runs them, as
	// the test's fixture of that system says.
	Own guest.Own
}

// spec is the kind's conformance spec, named.
func (o Options) spec(name string) guest.Spec {
	var s guest.Spec
	if c, ok := o.Kind.(guest.Conformable); ok {
		s = c.ConformanceSpec()
	}
	s.Name, s.Kind = name, o.Kind.Name()
	for k, v := range o.Own {
		s.Own = s.Own.With(k, v)
	}
	if o.Runtime != "" {
		s.Runtime = o.Runtime
	}
	return s
}

// RequiredKindsEnv names the kinds a test host promises to run, separated
// by commas, or "all". A kind whose Probe refuses this host is skipped,
// with the probe's reason, unless the host promised it: there the refusal
// is a failure, so a probe that regresses into refusing cannot pass as a
// host without the capability.
const RequiredKindsEnv = "VFLEET_TEST_KINDS"

// probeKind skips the test when this host cannot run the kind's conformance
// guests, as its Probe says; a refusal that does not wrap
// guest.ErrNotSupported with a reason, or of a kind RequiredKindsEnv
// names, fails it.
func probeKind(t *testing.T, o Options) {
	t.Helper()
	k := o.Kind
	// A host promises a kind's default runtime; another it lacks (crun on
	// a hybrid cgroup layout) is skipped with the probe's reason.
	fail, why := probeVerdict(k.Name(), k.Probe(context.Background(), o.spec("").Runtime), required(k.Name()) && o.defaultRuntime())
	switch {
	case why == "":
	case fail:
		t.Fatal(why)
	default:
		t.Skip(why)
	}
}

// probeVerdict says what a kind's probe result, err, makes of the suite:
// no reason to run it, or a reason to skip it or to fail.
func probeVerdict(kind string, err error, required bool) (fail bool, why string) {
	switch {
	case err == nil:
		return false, ""
	case err == guest.ErrNotSupported: // the bare sentinel itself, not one wrapping a reason
		return true, fmt.Sprintf("probe of kind %s: a bare %v says nothing of what is missing", kind, err)
	case !errors.Is(err, guest.ErrNotSupported):
		return true, fmt.Sprintf("probe of kind %s: %v (a refusal must wrap guest.ErrNotSupported)", kind, err)
	case required:
		return true, fmt.Sprintf("kind %s must run on this host (%s=%s): %v", kind, RequiredKindsEnv, os.Getenv(RequiredKindsEnv), err)
	}
	return false, fmt.Sprintf("kind %s cannot run on this host: %v", kind, err)
}

func required(kind string) bool {
	list := strings.Split(os.Getenv(RequiredKindsEnv), ",")
	return slices.Contains(list, "all") || slices.Contains(list, kind)
}

// env returns a fresh run environment whose ledger must end empty.
func env(t *testing.T, o Options) guest.Env {
	t.Helper()
	root, led := testutil.Ledger(t)
	return guest.Env{RunID: testutil.RunID(t), RootFS: o.RootFS, AgentPath: o.AgentPath, StateDir: root + "/state", Ledger: led}
}

func newGuest(t *testing.T, o Options, spec guest.Spec) (guest.Guest, guest.Env) {
	t.Helper()
	e := env(t, o)
	g, err := o.Kind.New(spec, e)
	if err != nil {
		t.Fatal(err)
	}
	return g, e
}

// Run runs the suite; the test package must call Main from its TestMain.
func Run(t *testing.T, o Options) {
	testutil.RequiresRoot(t)
	probeKind(t, o)
	t.Run("Lifecycle", func(t *testing.T) { lifecycle(t, o) })
	t.Run("CancelledStart", func(t *testing.T) { cancelledStart(t, o) })
	t.Run("CancelDuringStart", func(t *testing.T) { cancelDuringStart(t, o) })
	t.Run("Traits", func(t *testing.T) { traits(t, o) })
	t.Run("Security", func(t *testing.T) { security(t, o) })
	t.Run("Detached", func(t *testing.T) { detached(t, o) })
}

// defaultRuntime says whether the guests run under the kind's default
// runtime.
func (o Options) defaultRuntime() bool {
	r, ok := o.Kind.(guest.Runtimed)
	return !ok || o.Runtime == "" || o.Runtime == r.Runtimes()[0]
}

// traitsOf are the traits of the kind's guests under the runtime under
// test, as the rest of vfleet asks them.
func traitsOf(o Options) guest.Traits {
	return guest.TraitsOf(guest.Spec{Kind: o.Kind.Name(), Runtime: o.Runtime})
}

// profiles are the security profiles the kind takes under the runtime
// under test, its default first.
func profiles(o Options) []string {
	if p := traitsOf(o).Security; len(p) > 0 {
		return p
	}
	return []string{guest.SecurityUnconfined}
}

func lifecycle(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	g, e := newGuest(t, o, o.spec("conf-a"))
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
	elsewhere := traitsOf(o).Elsewhere
	if info.BootTime <= 0 || len(info.PIDs) == 0 != elsewhere || info.ScratchDir == "" || info.Kind != o.Kind.Name() {
		t.Errorf("info = %+v (its processes elsewhere: %v)", info, elsewhere)
	}
	// A guest that names no profile runs under its kind's default, and
	// its record says which.
	if got, want := info.Details["security"], profiles(o)[0]; got != want {
		t.Errorf("a guest of the kind's defaults records security %q, want its default %q", got, want)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{o.AgentPath, "--version"}})
	if err != nil || !r.Succeeded() || !strings.Contains(string(r.Stdout), "vfleet-agent") {
		t.Fatalf("agent --version: %v %+v", err, r)
	}
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"hostname"}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("hostname: %v %+v", err, r)
	}
	// A kind that confines nothing is the bare host, which keeps the
	// host's name; any other gives its guest a name of its own.
	want := "conf-a"
	if len(traitsOf(o).Security) == 0 {
		if want, err = os.Hostname(); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.TrimSpace(string(r.Stdout)); got != want {
		t.Errorf("process sees hostname %q, want %q", got, want)
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
	_, err = g.Exec(ctx, agent.Request{Argv: []string{"/no/such/tool"}})
	if !errors.Is(err, agent.ErrRemote) {
		t.Errorf("missing binary: err = %v, want ErrRemote", err)
	}
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "exit 7"}})
	if err != nil || r.ExitCode != 7 {
		t.Errorf("exit status lost: %v %+v", err, r)
	}
	// A daemon leaves the agent's session and process group, and its
	// parent exits: only the guest's cgroup still holds it.
	r, err = g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", `setsid sh -c "sleep 3191" >/dev/null 2>&1 </dev/null & echo started`}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("daemon: %v %+v", err, r)
	}
	runCgroup := cgroup.PathOf(e.RunID, "")
	if running := len(testutil.RunningIn(t, runCgroup)) > 0; running == elsewhere {
		t.Errorf("the guest's processes run in its run's cgroups (%s): %v; its kind says they are elsewhere: %v", runCgroup, running, elsewhere)
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

func cancelledStart(t *testing.T, o Options) {
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	g, _ := newGuest(t, o, o.spec("conf-c"))
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
		g, _ := newGuest(t, o, o.spec("conf-d"))
		ctx, cancel := context.WithTimeout(context.Background(), after)
		err := g.Start(ctx)
		cancel()
		// Either outcome is fine; what matters is that nothing is left.
		if stopErr := g.Stop(context.Background()); stopErr != nil {
			t.Errorf("stop after a start interrupted at %s (start err %v): %v", after, err, stopErr)
		}
	}
}

// security starts a guest under each profile the kind takes but its
// default (Lifecycle's), explicitly named: it must work and say so. A
// profile the kind does not take is refused before anything starts.
func security(t *testing.T, o Options) {
	taken := profiles(o)
	for _, p := range guest.SecurityProfiles {
		if slices.Contains(taken, p) {
			continue
		}
		spec := o.spec("conf-s")
		spec.Security = p
		if _, err := o.Kind.New(spec, guest.Env{}); err == nil {
			t.Errorf("security %q, which the kind does not take (it takes %v), was accepted", p, taken)
		}
	}
	for _, p := range taken[1:] {
		t.Run(p, func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			defer testutil.CheckLeaks(t, before)
			spec := o.spec("conf-s")
			spec.Security = p
			g, _ := newGuest(t, o, spec)
			ctx := context.Background()
			if err := g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer g.Stop(ctx)
			if got := g.Info().Details["security"]; got != p {
				t.Errorf("a guest under security %s records %q", p, got)
			}
			r, err := g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "touch probe && echo ok"}, Dir: g.Info().ScratchDir})
			if err != nil || strings.TrimSpace(string(r.Stdout)) != "ok" {
				t.Errorf("exec under security %s: %v %+v", p, err, r)
			}
			if err := g.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
