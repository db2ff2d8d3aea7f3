package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// agentPingTimeout bounds each guest's check in Health: a live agent
// answers in milliseconds, and a dead guest must not stall the table. The
// checks run side by side, so the bound is the table's wait, and it leaves
// room for an emulated (TCG) guest on a busy host, which took over 2 s to
// answer its first ping beside other guests booting.
const agentPingTimeout = 10 * time.Second

// Free makes sure no fleet called name is up: the state file of one whose
// resources are gone is forgotten.
func (d Dir) Free(ctx context.Context, name string) error {
	old, err := d.Read(name)
	if errors.Is(err, ErrNoFleet) {
		return nil
	}
	if err != nil {
		return err
	}
	if !d.Gone(old.RunKey) {
		return fmt.Errorf("fleet %s is already up (run %d, since %s): take it down with 'vfleet fleet down %s', or give this one another --name",
			name, old.RunID, old.Started.Local().Format(time.DateTime), name)
	}
	d.Forget(ctx, old)
	return nil
}

// Up is a fleet that came up.
type Up struct {
	State State
	// Run is its run as stored, with each guest's boot time.
	Run store.Run
	// LaunchTime is how long starting the guests took.
	LaunchTime time.Duration
}

// Up starts every guest of the spec's plan (and its network), leaves them
// running and publishes the fleet as name; opts.Store, at db, records its
// run. A fleet comes up whole or not at all: if a guest fails to start, or
// ctx is cancelled, everything started is torn down. launched is called
// once runner.Launch returns, before anything more is told on
// opts.Progress.
func (d Dir) Up(ctx context.Context, spec *scenario.Spec, name, db string, opts runner.Options, launched func()) (Up, error) {
	st, progress := opts.Store, opts.Progress
	plan := spec.Expand()
	watch := &launchWatch{pids: map[string][]int{}}
	opts.Observer = watch
	progress.Logf("fleet %s: scenario %s, %d guests; run recorded in %s", name, spec.Name, len(plan.Guests), db)
	began := time.Now()
	id, key, err := runner.Launch(ctx, plan, opts)
	launchTime := time.Since(began)
	launched()
	if err != nil {
		if errors.Is(err, context.Canceled) && (key == "" || d.Gone(key)) {
			return Up{}, errors.New("interrupted; everything the fleet had started was torn down")
		}
		return Up{}, fmt.Errorf("fleet %s: %w", name, err)
	}
	// From here the guests run detached: any failure must remove them, or
	// they would be up with no fleet to reach or take them down by.
	abort := func(cause error) (Up, error) {
		progress.Logf("fleet %s: tearing down what was started", name)
		tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer tcancel()
		_, cerr := ledger.CleanRun(tctx, d.ledgerRoot(), key, ledger.CleanOptions{Force: true})
		ferr := st.FinishRun(tctx, id, store.StatusFailed, errors.Join(cause, cerr).Error(), time.Now().UTC())
		return Up{}, errors.Join(cause, cerr, ferr)
	}
	if failed := watch.failedGuests(); len(failed) > 0 {
		return abort(fmt.Errorf("fleet %s: guest(s) %s did not start (see above)", name, strings.Join(failed, ", ")))
	}
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return abort(err)
	}
	state := State{Name: name, RunID: id, RunKey: key, Scenario: spec.Name, Source: spec.Source, DB: db,
		Started: time.Now().UTC(), Guests: guests(plan, run.Guests, watch.pids)}
	if err := ctx.Err(); err != nil {
		return abort(errors.New("interrupted"))
	}
	if err := d.Publish(state); err != nil {
		return abort(err)
	}
	return Up{State: state, Run: run, LaunchTime: launchTime}, nil
}

// guests lists the fleet's guests in the plan's order, the network's peer
// last, as the stored records describe them.
func guests(plan *scenario.Plan, records map[string]store.GuestRecord, pids map[string][]int) []Guest {
	names := make([]string, 0, len(plan.Guests)+1)
	for _, pg := range plan.Guests {
		names = append(names, pg.Spec.Name)
	}
	if _, ok := records[scenario.PeerName]; ok {
		names = append(names, scenario.PeerName)
	}
	var out []Guest
	for _, n := range names {
		rec := records[n]
		// A VM's virtio-serial channel serves one client at a time: it is
		// free once `up`, whose client held it, has exited.
		addr := rec.Details["agent_addr"]
		if addr == "" {
			addr = rec.Details["agent_socket"]
		}
		out = append(out, Guest{Name: n, Group: rec.Group, Kind: rec.Kind, Runtime: rec.Runtime, AgentAddr: addr, PIDs: pids[n]})
	}
	return out
}

// launchWatch learns from runner.Launch what the stored guest records
// lack: each guest's processes, and which guests failed to start.
type launchWatch struct {
	mu     sync.Mutex
	pids   map[string][]int
	failed []string
}

func (w *launchWatch) GuestStarting(runner.GuestEvent) func(runner.GuestEvent, error) {
	return func(e runner.GuestEvent, err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.failed = append(w.failed, e.Name)
			return
		}
		w.pids[e.Name] = e.PIDs
	}
}

func (w *launchWatch) failedGuests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	sort.Strings(w.failed)
	return w.failed
}

func (*launchWatch) RunStarted(runner.RunEvent)               {}
func (*launchWatch) StepStarted(runner.StepEvent) func(error) { return func(error) {} }
func (*launchWatch) SamplesStored(int64, []store.Sample)      {}
func (*launchWatch) TeardownStarted(int64) func(error)        { return func(error) {} }
func (*launchWatch) GuestStopped(runner.GuestEvent, error)    {}
func (*launchWatch) RunFinished(int64, string)                {}

// Health is what a check found about one guest.
type Health struct {
	// AgentErr is why the guest's agent did not answer; nil when it did.
	AgentErr error
	// Alive says, per PID, whether the process runs.
	Alive []bool
}

// AnyAlive says whether one of the guest's processes runs.
func (h Health) AnyAlive() bool {
	for _, a := range h.Alive {
		if a {
			return true
		}
	}
	return false
}

// CheckGuests pings every guest's agent at once, so a fleet of dead
// guests takes one timeout, not one per guest.
func CheckGuests(ctx context.Context, guests []Guest) []Health {
	out := make([]Health, len(guests))
	var wg sync.WaitGroup
	for i, gs := range guests {
		out[i].Alive = make([]bool, len(gs.PIDs))
		for j, pid := range gs.PIDs {
			out[i].Alive[j] = ProcessRunning(pid)
		}
		if gs.AgentAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, agentPingTimeout)
			defer cancel()
			c, err := agent.Dial(pctx, gs.AgentAddr)
			if err == nil {
				err = c.Ping(pctx)
				c.Close()
			}
			out[i].AgentErr = err
		}()
	}
	wg.Wait()
	return out
}

// ProcessRunning says whether pid runs. A guest process outlives its `up`
// and is reparented; once dead it stays a zombie until its new parent
// reaps it, and a zombie is not running.
func ProcessRunning(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Running()
}

// Exec runs argv in a guest of the fleet called fleetName (with no name,
// the only one) through its agent, copies its output to stdout and stderr
// and returns its exit status as a shell would give it. An error that is
// ErrNotAnswering means the guest's agent gave no answer.
func (d Dir) Exec(fleetName, guestName string, argv []string, timeout time.Duration, stdout, stderr io.Writer) (int, error) {
	s, err := d.Resolve(fleetName)
	if err != nil {
		return 0, err
	}
	if d.Gone(s.RunKey) {
		d.Forget(context.Background(), s)
		return 0, fmt.Errorf("fleet %s is gone: its guests and resources were removed (by 'vfleet clean'?); forgotten", s.Name)
	}
	gs, err := s.Guest(guestName)
	if err != nil {
		return 0, err
	}
	if gs.AgentAddr == "" {
		return 0, fmt.Errorf("fleet %s: guest %s has no agent to run commands through", s.Name, gs.Name)
	}
	// The agent kills the command at the timeout; the margin lets its
	// reply, with the output so far, arrive.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	client, err := agent.Dial(ctx, gs.AgentAddr)
	if err != nil {
		return 0, agentError(s.Name, gs.Name, err)
	}
	defer client.Close()
	reply, err := client.Do(ctx, agent.Request{Argv: argv, TimeoutMS: timeout.Milliseconds()})
	stdout.Write(reply.Stdout)
	stderr.Write(reply.Stderr)
	if err != nil {
		return 0, agentError(s.Name, gs.Name, err)
	}
	if cuts := reply.Cuts(); cuts != "" {
		fmt.Fprintf(stderr, "vfleet: %s\n", cuts)
	}
	return exitStatus(stderr, reply, timeout), nil
}

// ErrNotAnswering: a guest's agent gave no answer at all.
var ErrNotAnswering = errors.New("guest not answering")

// notAnsweringError is ErrNotAnswering naming the fleet and guest.
type notAnsweringError struct {
	fleet, guest string
	err          error
}

func (e notAnsweringError) Error() string {
	return fmt.Sprintf("fleet %s: guest %s is not answering (%v); see 'vfleet fleet status %s'", e.fleet, e.guest, e.err, e.fleet)
}

func (e notAnsweringError) Unwrap() error      { return e.err }
func (notAnsweringError) Is(target error) bool { return target == ErrNotAnswering }

// agentError wraps an error from talking to a guest's agent, marking those
// where no answer came: nothing listens, or the connection broke or stalled
// before a reply. An answer vfleet could not use (another protocol
// version, a request the agent refused) is an error of another kind.
func agentError(fleet, guest string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) {
		return notAnsweringError{fleet: fleet, guest: guest, err: err}
	}
	return fmt.Errorf("fleet %s: guest %s: %w", fleet, guest, err)
}

// exitStatus is the command's exit status as a shell would give it; a
// timeout is told on stderr and gives 124, as timeout(1) does.
func exitStatus(stderr io.Writer, r agent.Reply, timeout time.Duration) int {
	switch {
	case r.TimedOut:
		fmt.Fprintf(stderr, "vfleet: the command timed out after %s (--timeout) and was killed\n", timeout)
		return 124
	case r.Signal != "":
		fmt.Fprintf(stderr, "vfleet: the command was ended by a signal (%s)\n", r.Signal)
		return 128 + signalNumber(r.Signal)
	default:
		return r.ExitCode
	}
}

// signalNumber maps a signal's name as the agent reports it (Go's
// description, "killed") back to its number; 0 when unknown.
func signalNumber(name string) int {
	for s := syscall.Signal(1); s < 65; s++ {
		if s.String() == name {
			return int(s)
		}
	}
	return 0
}

// Down stops the fleet's guests and removes everything it created, newest
// first, telling removed of each resource, and forgets the fleet. It
// returns how many resources it removed.
func (d Dir) Down(ctx context.Context, s State, removed func(ledger.Removed)) (int, error) {
	n, failed := 0, 0
	_, err := ledger.CleanRun(ctx, d.ledgerRoot(), s.RunKey, ledger.CleanOptions{
		Progress: func(r ledger.Removed) {
			if r.Err != nil {
				failed++
			} else {
				n++
			}
			removed(r)
		},
	})
	if errors.Is(err, ledger.ErrOwnerAlive) {
		return n, fmt.Errorf("fleet %s is still starting (its 'vfleet fleet up' is running): stop that with Ctrl-C instead", s.Name)
	}
	if err != nil || failed > 0 {
		// The state file stays, so that another down can retry what failed.
		return n, errors.Join(fmt.Errorf("fleet %s: %d resource(s) could not be removed; run 'vfleet fleet down %s' again", s.Name, failed, s.Name), err)
	}
	d.Forget(ctx, s)
	return n, nil
}

// Forget ends a fleet whose resources are gone: its run, if still
// running, is marked complete where `up` recorded it, and its state file
// removed. The store is told on a best-effort basis: the fleet is gone
// either way.
func (d Dir) Forget(ctx context.Context, s State) {
	if err := finishRun(ctx, s); err != nil {
		fmt.Fprintf(d.warnings, "vfleet: fleet %s: could not mark run %d complete: %v\n", s.Name, s.RunID, err)
	}
	if err := d.Remove(s.Name); err != nil {
		fmt.Fprintf(d.warnings, "vfleet: fleet %s: %v\n", s.Name, err)
	}
}

func finishRun(ctx context.Context, s State) error {
	// Opening a missing database would create an empty one.
	if _, err := os.Stat(s.DB); err != nil {
		return err
	}
	st, err := store.Open(s.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.GetRun(ctx, s.RunID)
	if err != nil {
		return err
	}
	if r.Status != store.StatusRunning {
		// Ended already: `vfleet clean` marks aborted the fleet it removed,
		// and that is what happened to it.
		return nil
	}
	return st.FinishRun(ctx, s.RunID, store.StatusComplete, "", time.Now().UTC())
}
