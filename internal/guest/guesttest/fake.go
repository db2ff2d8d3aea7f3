package guesttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
)

// Fake is a guest kind for the tests of what drives guests (the runner,
// its metrics and traces): its guests start and stop instantly and answer
// every request with a fixed output, fail where told to, and count their
// starts and stops. Register it from the test package's init.
type Fake struct {
	name   string
	info   func(guest.Spec) guest.Info
	traits guest.Traits

	mu       sync.Mutex
	output   []byte
	failExec map[string]bool
	failWith map[string][]byte // what a failing guest's tool says
	failBoot map[string]bool
	lacks    map[string]bool // programs the guests' image does not have
	onExec   func(guestName string)
	started  map[string]int
	stopped  map[string]int
	// skew is how far each guest's clock is ahead of the host's; startAt
	// records, on the host's clock, when each guest was asked to start
	// its latest request.
	skew    map[string]time.Duration
	wait    map[string]time.Duration
	startAt map[string]time.Time
	// timeout records each guest's latest execution's time limit.
	timeout map[string]time.Duration
	cut     *agent.Cut // what every execution's stdout lost, nil for none
}

// NewFake returns a kind registered under name whose guests report
// info(spec); requests must use that info's ScratchDir and a timeout.
func NewFake(name string, info func(guest.Spec) guest.Info) *Fake {
	f := &Fake{name: name, info: info}
	f.Reset(nil)
	return f
}

// WithTraits makes the fake kind claim traits, to stand in for a kind
// (a VM's) that a test does not compile in.
func (f *Fake) WithTraits(t guest.Traits) *Fake {
	f.traits = t
	return f
}

// Traits implements guest.WithTraits.
func (f *Fake) Traits() guest.Traits { return f.traits }

// Reset forgets failures, hooks and counts and sets the output every
// request gets.
func (f *Fake) Reset(output []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.output = output
	f.failExec, f.failBoot, f.lacks = map[string]bool{}, map[string]bool{}, map[string]bool{}
	f.failWith = map[string][]byte{}
	f.started, f.stopped = map[string]int{}, map[string]int{}
	f.skew, f.wait, f.startAt = map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Time{}
	f.timeout = map[string]time.Duration{}
	f.onExec, f.cut = nil, nil
}

// CutOutput has every execution's reply say the agent dropped what cut
// says of its stdout.
func (f *Fake) CutOutput(cut agent.Cut) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = &cut
}

// Timeouts says each guest's latest execution's time limit.
func (f *Fake) Timeouts() map[string]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.timeout)
}

// SetClockSkew puts the named guest's clock d ahead of the host's.
func (f *Fake) SetClockSkew(guestName string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skew[guestName] = d
}

// SetStartWait has the named guest's timed executions wait d for a CPU
// after they are let go, as a tool among more than the CPUs does.
func (f *Fake) SetStartWait(guestName string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wait[guestName] = d
}

// StartedAt says, on the host's clock, when each guest's latest timed
// request was asked to start.
func (f *Fake) StartedAt() map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.startAt)
}

// SetOutput changes what requests get from now on; it may be called from
// an OnExec hook.
func (f *Fake) SetOutput(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.output = b
}

// Output is what requests get now.
func (f *Fake) Output() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.output
}

// FailExec makes every request to the named guest exit 1.
func (f *Fake) FailExec(guestName string) { f.set(f.failExec, guestName) }

// FailExecSaying makes every request to the named guest exit 1 with stderr.
func (f *Fake) FailExecSaying(guestName string, stderr []byte) {
	f.set(f.failExec, guestName)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWith[guestName] = stderr
}

// Lacks makes the guests' image lack the named program.
func (f *Fake) Lacks(program string) { f.set(f.lacks, program) }

// FailBoot makes the named guest fail to start.
func (f *Fake) FailBoot(guestName string) { f.set(f.failBoot, guestName) }

func (f *Fake) set(m map[string]bool, guestName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m[guestName] = true
}

// OnExec runs fn, with the guest's name, before each answer.
func (f *Fake) OnExec(fn func(guestName string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onExec = fn
}

// Started and Stopped count each guest's starts and stops.
func (f *Fake) Started() map[string]int { return f.counts(f.started) }
func (f *Fake) Stopped() map[string]int { return f.counts(f.stopped) }

func (f *Fake) counts(m map[string]int) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (f *Fake) Name() string                        { return f.name }
func (f *Fake) Probe(context.Context, string) error { return nil }
func (f *Fake) New(s guest.Spec, _ guest.Env) (guest.Guest, error) {
	return &fakeGuest{f: f, spec: s}, nil
}

type fakeGuest struct {
	f    *Fake
	spec guest.Spec
}

func (g *fakeGuest) Spec() guest.Spec { return g.spec }
func (g *fakeGuest) Info() guest.Info { return g.f.info(g.spec) }

func (g *fakeGuest) Start(ctx context.Context) error {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if g.f.failBoot[g.spec.Name] {
		return errors.New("boot failed")
	}
	g.f.started[g.spec.Name]++
	return ctx.Err()
}

func (g *fakeGuest) Stop(context.Context) error {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	g.f.stopped[g.spec.Name]++
	return nil
}

// Exec calls the hook without holding the lock, so the hook may change
// the output.
func (g *fakeGuest) Exec(ctx context.Context, req agent.Request) (agent.Reply, error) {
	g.f.mu.Lock()
	hook, lacks := g.f.onExec, g.f.lacks[req.Arg]
	g.f.mu.Unlock()
	if req.Op == agent.OpLookPath {
		if lacks {
			return agent.Reply{V: 1, ExitCode: 1}, nil
		}
		return agent.Reply{V: 1, Stdout: []byte("/usr/bin/" + req.Arg)}, nil
	}
	if len(req.Argv) > 1 && req.Argv[1] == probe.ProbeArg {
		// The isolation audit, which is no workload's execution: the test
		// process's own evidence.
		var out bytes.Buffer
		if err := probe.RunProbe(req.Argv[2:], &out); err != nil {
			return agent.Reply{V: 1, ExitCode: 1, Stderr: []byte(err.Error())}, nil
		}
		return agent.Reply{V: 1, Stdout: out.Bytes()}, nil
	}
	if hook != nil {
		hook(g.spec.Name)
	}
	if err := ctx.Err(); err != nil {
		return agent.Reply{}, err
	}
	g.f.mu.Lock()
	skew := g.f.skew[g.spec.Name]
	g.f.mu.Unlock()
	if req.Op == agent.OpPing {
		return agent.Reply{V: 1, AgentUnixNS: time.Now().Add(skew).UnixNano()}, nil
	}
	if dir := g.Info().ScratchDir; req.Dir != dir || req.TimeoutMS <= 0 {
		return agent.Reply{}, fmt.Errorf("request with dir %q timeout %d, want dir %q and a timeout", req.Dir, req.TimeoutMS, dir)
	}
	started := time.Now().Add(skew)
	g.f.mu.Lock()
	if req.StartAtUnixNS != 0 {
		started = time.Unix(0, req.StartAtUnixNS)
		g.f.startAt[g.spec.Name] = started.Add(-skew)
	}
	g.f.timeout[g.spec.Name] = time.Duration(req.TimeoutMS) * time.Millisecond
	fail, failWith, out, wait, cut := g.f.failExec[g.spec.Name], g.f.failWith[g.spec.Name], g.f.output, g.f.wait[g.spec.Name], g.f.cut
	g.f.mu.Unlock()
	if fail {
		if failWith == nil {
			failWith = []byte("sysbench: out of luck\n")
		}
		return agent.Reply{V: 1, ExitCode: 1, Stderr: failWith}, nil
	}
	const wall = 2 * time.Second
	return agent.Reply{V: 1, Stdout: out, WallNS: wall.Nanoseconds(), Rusage: agent.Rusage{UserNS: 1e9, SysNS: 5e8},
		StartedUnixNS: started.UnixNano(), EndedUnixNS: started.Add(wall).UnixNano(), StartWaitNS: wait.Nanoseconds(),
		Truncated: cut != nil, StdoutCut: cut}, nil
}
