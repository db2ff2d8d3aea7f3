package runner

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ksm"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath/fastpath"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// Progress receives what a run is doing. Implementations must be safe for
// concurrent use.
type Progress interface {
	// Phase announces a new phase with the number of items it has.
	Phase(name string, total int)
	// Item reports one finished item of the current phase; err is nil on success.
	Item(desc string, err error)
	// Logf reports a free-form line.
	Logf(format string, args ...any)
}

// Options configure Run.
type Options struct {
	Store *store.Store
	// StateRoot holds per-run state (runs/KEY) and ledgers (ledger/KEY).
	StateRoot string
	// RootFS and AgentPath come from the guest image.
	RootFS    string
	AgentPath string
	// Images are the users' images the plan's guests name (guest.Spec.Image),
	// unpacked; AgentBinary is the static agent on the host, which guests
	// of those images get brought in.
	Images      map[string]UserImage
	AgentBinary string
	// Variants are vfleet's images other than the default that the plan's
	// VMs boot: of an emulated architecture (guest.Spec.Arch), with another
	// kernel (guest.Spec.KernelFlavour).
	Variants map[image.Variant]VariantImage
	Host     hostinfo.Fingerprint
	Progress Progress
	// StartConcurrency bounds how many guests start at once.
	StartConcurrency int
	// TeardownTimeout bounds stopping all guests, even after cancellation.
	TeardownTimeout time.Duration
	// Observer is told what the run does (metrics, traces); nil for none.
	Observer Observer
	// AuditOnly starts the first phase's guests, audits their isolation
	// and stops them, measuring nothing (`vfleet audit`).
	AuditOnly bool
	// Attack makes the audit try known ways out of each guest too
	// (package attack), non-destructively (`vfleet audit --attack`).
	Attack bool
	// MoreRounds, when set, is asked when a workload's last round so far
	// ends (every guest measured its repetitions, done of them each)
	// whether to measure another, and says why, or "" for no. Its samples
	// so far are in the store. `vfleet run --baseline` measures on while a change
	// against the baseline is too little repeated to be tested.
	MoreRounds func(ctx context.Context, runID int64, workloadID string, done int) (why string)
	// MoreRoundsAB, when set, is asked in an A/B run when step i of both
	// runs ends the last round so far of the same workload, whether both
	// measure another, with ids A's and B's. `vfleet run --ab` measures on
	// while a metric of the workload is undecided between them.
	MoreRoundsAB func(ctx context.Context, ids [2]int64, workloadID string, done int) (why string)
	// PeerAgent finds the static agent for a remote peer's architecture
	// (a Debian name: amd64, arm64); nil when no run has a remote peer.
	PeerAgent func(arch string) (string, error)
}

// Observer is told what a run does, for metrics and traces. Its methods are
// called from several goroutines at once (guests start in parallel) and
// inside the measuring loop, so they must be quick and must not block.
// The returned done functions are called exactly once.
type Observer interface {
	// RunStarted: the run is recorded and about to build its guests.
	RunStarted(RunEvent)
	// GuestStarting: a guest is about to start; done gets what started
	// (Info fields are zero when err is not nil).
	GuestStarting(GuestEvent) (done func(GuestEvent, error))
	// StepStarted: a step is about to run; done gets its outcome.
	StepStarted(StepEvent) (done func(error))
	// SamplesStored: a step's samples were committed to the store.
	SamplesStored(runID int64, samples []store.Sample)
	// TeardownStarted: the run's guests are about to be stopped.
	TeardownStarted(runID int64) (done func(error))
	// GuestStopped: a guest was stopped, err telling how that went.
	GuestStopped(g GuestEvent, err error)
	// RunFinished: the run's final status is recorded.
	RunFinished(runID int64, status string)
}

// DataPaths reads the counters of a run's eBPF data paths when asked.
type DataPaths interface {
	DataPathCounters() map[string]fastpath.Counters
}

// NetworkObserver is an Observer that also follows the run's network: it
// is handed the data paths once they exist and may read their counters
// until the run's teardown ends.
type NetworkObserver interface {
	NetworkReady(runID int64, paths DataPaths)
}

// RunEvent describes a run that started.
type RunEvent struct {
	ID       int64
	Key      string // names the run's resources, see runKey
	Scenario string
	Label    string // "A" or "B" in an A/B run, else empty
	Steps    int
	Guests   int
}

// GuestEvent describes one guest of a run.
type GuestEvent struct {
	RunID   int64
	Name    string
	Group   string
	Kind    string
	Runtime string
	// Set once the guest started.
	BootTime time.Duration
	PIDs     []int
	Cgroup   string
}

// StepEvent describes one step of a run.
type StepEvent struct {
	RunID      int64
	Guest      string
	Group      string
	Kind       string
	WorkloadID string
	Workload   string
	Params     map[string]string
	Repetition int
	Warmup     bool
}

type nopObserver struct{}

func (nopObserver) RunStarted(RunEvent) {}
func (nopObserver) GuestStarting(GuestEvent) func(GuestEvent, error) {
	return func(GuestEvent, error) {}
}
func (nopObserver) StepStarted(StepEvent) func(error)   { return func(error) {} }
func (nopObserver) SamplesStored(int64, []store.Sample) {}
func (nopObserver) TeardownStarted(int64) func(error)   { return func(error) {} }
func (nopObserver) GuestStopped(GuestEvent, error)      {}
func (nopObserver) RunFinished(int64, string)           {}

func guestEvent(runID int64, group string, spec guest.Spec, g guest.Guest) GuestEvent {
	e := GuestEvent{RunID: runID, Name: spec.Name, Group: group, Kind: spec.Kind, Runtime: spec.Runtime}
	if g != nil {
		info := g.Info()
		if info.Runtime != "" {
			e.Runtime = info.Runtime
		}
		e.BootTime, e.PIDs, e.Cgroup = info.BootTime, info.PIDs, info.Cgroup
	}
	return e
}

// ErrNoGuests is returned when not a single guest could be started.
var ErrNoGuests = errors.New("no guest started")

// errNetwork is wrapped by a failure to build or take down the run's
// network, which fails the run: a path in turn that could not have the
// NIC measured nothing, and the next must not take a NIC not given back.
var errNetwork = errors.New("network")

// Run executes plan and returns the stored run's id. The id is valid even
// when err is not nil, unless it is 0: an interrupted run keeps its samples.
func Run(ctx context.Context, plan *scenario.Plan, opts Options) (int64, error) {
	ids, err := runPlans(ctx, []*scenario.Plan{plan}, opts)
	return ids[0], err
}

// RunAB executes two plans as two runs, step by step in alternating order
// (A then B, then B then A, …), so that drift of the machine during the
// runs affects both alike instead of masquerading as a difference.
func RunAB(ctx context.Context, a, b *scenario.Plan, opts Options) ([2]int64, error) {
	ids, err := runPlans(ctx, []*scenario.Plan{a, b}, opts)
	return [2]int64{ids[0], ids[1]}, err
}

// Launch builds plan's network and starts its guests as a long-lived
// fleet and returns with them running: the run stays "running" in the
// store, its ledger keeps every resource, and undoing that ledger (`vfleet
// fleet down`, `vfleet clean`) is what ends it. On failure, whatever was
// started is torn down before Launch returns. The plan's steps are not run.
func Launch(ctx context.Context, plan *scenario.Plan, opts Options) (id int64, key string, err error) {
	// A network per phase is a path's on a dedicated NIC, which goes with
	// a remote peer, which lives as long as this process's SSH connection.
	if plan.NetworkPerPhase() {
		return 0, "", ErrDetachedPeer
	}
	opts = withDefaults(opts)
	r, err := newRun(ctx, plan, opts)
	if err != nil {
		return 0, "", err
	}
	r.detached = true
	opts.Observer.RunStarted(RunEvent{ID: r.id, Key: r.key, Scenario: plan.Spec.Name, Guests: len(plan.Guests)})
	err = r.setup(ctx)
	if err == nil {
		names := make([]string, len(plan.Guests))
		for i, pg := range plan.Guests {
			names[i] = pg.Spec.Name
		}
		err = r.startGuests(ctx, names)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		// The fleet outlives this process: no owner of the run can die now,
		// and only taking the fleet down ends it.
		err = opts.Store.SetRunOwner(context.WithoutCancel(ctx), r.id, procfs.Process{})
	}
	if err == nil {
		r.led.Close()
		return r.id, r.key, nil
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.TeardownTimeout)
	defer cancel()
	err = errors.Join(err, r.teardown(tctx))
	status := store.StatusFailed
	if ferr := opts.Store.FinishRun(tctx, r.id, status, err.Error(), time.Now().UTC()); ferr != nil {
		err = errors.Join(err, ferr)
	}
	opts.Observer.RunFinished(r.id, status)
	return r.id, r.key, err
}

func withDefaults(opts Options) Options {
	if opts.StartConcurrency <= 0 {
		opts.StartConcurrency = 4
	}
	if opts.TeardownTimeout <= 0 {
		opts.TeardownTimeout = 60 * time.Second
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return opts
}

func runPlans(ctx context.Context, plans []*scenario.Plan, opts Options) (ids []int64, err error) {
	opts = withDefaults(opts)
	ids = make([]int64, len(plans))
	var runs []*run
	// Final statuses are written even when ctx is cancelled: an interrupted
	// run must say so in the store. This runs after the teardown, whose
	// freed disk may let samples the store refused during the run in.
	defer func() {
		finishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, r := range runs {
			if ferr := r.flushUnsaved(finishCtx); ferr != nil {
				err = errors.Join(err, ferr)
			}
			status, reason := r.outcome()
			if ferr := opts.Store.FinishRun(finishCtx, r.id, status, reason, time.Now().UTC()); ferr != nil {
				err = errors.Join(err, fmt.Errorf("record end of run %d (it stays 'running' until 'vfleet clean' or the next run marks it aborted): %w", r.id, ferr))
			}
			opts.Observer.RunFinished(r.id, status)
		}
	}()
	for i, plan := range plans {
		r, err := newRun(ctx, plan, opts)
		if err != nil {
			return ids, err
		}
		ev := RunEvent{ID: r.id, Key: r.key, Scenario: plan.Spec.Name, Steps: len(plan.Steps), Guests: len(plan.Guests)}
		if len(plans) > 1 {
			r.label = string(rune('A'+i)) + ": "
			ev.Label = string(rune('A' + i))
		}
		ids[i] = r.id
		runs = append(runs, r)
		opts.Observer.RunStarted(ev)
	}
	// The runs of an A/B pair take turns: during one's step the other's
	// guests are this vfleet's work too, not the host's other load.
	var keys []string
	for _, r := range runs {
		keys = append(keys, r.key)
	}
	for _, r := range runs {
		r.together = keys
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.TeardownTimeout)
		defer cancel()
		for _, r := range runs {
			if terr := r.teardown(tctx); terr != nil {
				err = errors.Join(err, terr)
			}
		}
	}()
	var errs []error
	var active []*run
	for _, r := range runs {
		if serr := r.setup(ctx); serr != nil {
			r.status, r.reason = store.StatusFailed, serr.Error()
			errs = append(errs, serr)
			continue
		}
		active = append(active, r)
	}
	for phase := 0; ; phase++ {
		var inPhase []*run
		for _, r := range active {
			if phase < len(r.plan.Phases) {
				inPhase = append(inPhase, r)
			}
		}
		if len(inPhase) == 0 {
			break
		}
		for _, r := range inPhase {
			if serr := r.startPhase(ctx, phase); serr != nil {
				stopAll(ctx, active, r, serr)
				return ids, errors.Join(append(errs, serr)...)
			}
		}
		if cerr := ctx.Err(); cerr != nil {
			cerr = fmt.Errorf("interrupted while starting guests: %w", cerr)
			stopAll(ctx, active, nil, cerr)
			return ids, errors.Join(append(errs, cerr)...)
		}
		if opts.AuditOnly && !inPhase[0].plan.Phases[phase].Kind.AuditEach() {
			break
		}
		if !opts.AuditOnly {
			if serr := runSteps(ctx, inPhase, phase, opts.Progress); serr != nil {
				stopAll(ctx, active, nil, serr)
				return ids, errors.Join(append(errs, serr)...)
			}
		}
		for _, r := range inPhase {
			eerr := r.endPhase(ctx, phase)
			switch {
			case eerr == nil:
			case errors.Is(eerr, errNetwork):
				// The NIC or the peer may still hold this path's wiring:
				// the next path must not take them.
				stopAll(ctx, active, r, eerr)
				return ids, errors.Join(append(errs, eerr)...)
			default:
				errs = append(errs, eerr)
			}
		}
	}
	markAll(active, store.StatusComplete)
	return ids, errors.Join(errs...)
}

func markAll(runs []*run, status string) {
	for _, r := range runs {
		r.status = status
	}
}

// stopAll records why the active runs stop early: the one whose guests
// could not start failed, as does any whose store refused its samples;
// the others were cut short (incomplete).
func stopAll(ctx context.Context, active []*run, culprit *run, cause error) {
	reason := cause.Error()
	if ctx.Err() != nil {
		reason = interruption(ctx)
	}
	for _, r := range active {
		r.status, r.reason = store.StatusIncomplete, reason
	}
	if culprit != nil && (errors.Is(cause, ErrNoGuests) || errors.Is(cause, errAllOrNothing) || errors.Is(cause, errNetwork) && ctx.Err() == nil) {
		culprit.status = store.StatusFailed
	}
}

// interruption says what interrupted a run: the cause its context was
// cancelled with (the CLI names the signal), else that it was cancelled.
func interruption(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return "interrupted (" + cause.Error() + ")"
	}
	return "interrupted"
}

func newRun(ctx context.Context, plan *scenario.Plan, opts Options) (*run, error) {
	spec := plan.Spec
	self, err := procfs.Self()
	if err != nil {
		return nil, fmt.Errorf("record run: %w", err)
	}
	id, err := opts.Store.CreateRun(ctx, &store.Run{
		ScenarioName:   spec.Name,
		ScenarioSource: spec.Source,
		ScenarioText:   spec.Text,
		ScenarioHash:   spec.Hash(),
		Baseline:       spec.Baseline,
		Started:        time.Now().UTC(),
		Status:         store.StatusRunning,
		Host:           opts.Host,
		Owner:          self,
		Dropped:        spec.Dropped,
	})
	if err != nil {
		return nil, fmt.Errorf("record run: %w", err)
	}
	// The caller's plan stays as given, to be run again or to be both
	// sides of an A/B run: what the run resolves of its guests (placement,
	// network attachments) is its own (startSpec). Only its list of steps
	// grows, with adaptive rounds, so that list is the run's own.
	own := *plan
	own.Steps = slices.Clone(plan.Steps)
	r := &run{id: id, key: runKey(id), plan: &own, opts: opts, status: store.StatusFailed}
	r.together = []string{r.key}
	if err := opts.Store.SetRunKey(ctx, id, r.key); err != nil {
		return nil, fmt.Errorf("record run: %w", err)
	}
	return r, nil
}

// runKey names the run's resources (state directory, ledger, container ids).
// The random part keeps keys unique when the store is reset.
func runKey(id int64) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("r%d-%s", id, hex.EncodeToString(b))
}

type run struct {
	id     int64
	key    string
	label  string         // "A: " and "B: " in an A/B run
	plan   *scenario.Plan // the caller's, but for its steps (see newRun)
	opts   Options
	status string
	reason string // why the run ended with status, when it did not complete
	// detached: the guests are a long-lived fleet's (see Launch).
	detached bool

	// results guards what the run failed to measure or to store, which
	// guests measured in parallel report.
	results     sync.Mutex
	failedSteps int
	// unsupportedSteps were refused by their guest's kernel (a tracer it
	// lacks): recorded once per group and workload, and no failure of the
	// run, since the run measured everything the guests can measure.
	unsupportedSteps int
	unsupported      unsupportedSteps
	failedGuests     int
	storeErr         error            // the store's first refusal; it stops the run
	unsaved          [][]store.Sample // refused samples, one slice per step
	unsavedFailures  []store.Failure

	// together are the keys of the runs this vfleet runs at once, this
	// one's among them: their cgroups are its own work.
	together []string

	led      *ledger.Ledger
	dirEntry ledger.Entry
	env      guest.Env
	guests   map[string]guest.Guest // started guests by name
	audited  bool                   // the host's own audit evidence is stored
	net      *netRun                // nil when the scenario has no network, or between paths in turn
	// pastNet describes the networks taken down before r.net, as the
	// peer's record does.
	pastNet map[string]string
	ksm     *ledger.Entry // the run's hold on KSM, nil without one
	rtHold  *ledger.Entry // the run's hold on the host's real-time settings (host_settings), nil without one
	records map[string]store.GuestRecord
	placed  placement
	// launched holds, for the guests of the latest start, how long after
	// it began each one was ready.
	launched map[string]time.Duration
	// The image's size on disk, for the density of every fleet size.
	imageOnce  sync.Once
	imageBytes int64
	imageErr   error
	// headlines holds each group's measured values of each workload's
	// headline metric, for adaptive repetitions.
	headlines map[headlineKey][]float64
	tools     toolCheck
}

// setup creates the run's ledger and state directory and starts its guests.
func (r *run) setup(ctx context.Context) error {
	led, err := ledger.Create(filepath.Join(r.opts.StateRoot, "ledger"), r.key)
	if err != nil {
		return err
	}
	stateDir := filepath.Join(r.opts.StateRoot, "runs", r.key)
	dirEntry, err := led.Record(ledger.KindDir, stateDir, nil)
	if err != nil {
		led.Close()
		return err
	}
	r.led, r.dirEntry = led, dirEntry
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	env := guest.Env{RunID: r.key, RootFS: r.opts.RootFS, AgentPath: r.opts.AgentPath, StateDir: stateDir, Ledger: led, Detached: r.detached,
		Progress: func(line string) { r.opts.Progress.Logf("%s%s", r.label, line) }}
	r.env = env
	r.guests = map[string]guest.Guest{}
	r.records = map[string]store.GuestRecord{}
	if err := r.placeGuests(); err != nil {
		return err
	}
	if err := r.holdKSM(ctx); err != nil {
		return err
	}
	if err := r.holdHostSettings(ctx); err != nil {
		return err
	}
	// Phases that own their networks build them as they begin
	// (startPhase).
	if r.plan.Spec.Network != nil && !r.plan.NetworkPerPhase() {
		r.opts.Progress.Logf("%sbuilding the network and starting its peer", r.label)
		return r.buildNetwork(ctx, nil)
	}
	return nil
}

// buildNetwork builds the run's network for the guests only names (every
// one when nil) and starts its peer.
func (r *run) buildNetwork(ctx context.Context, only []string) error {
	nr, err := newNetRun(ctx, r.plan, only, r.env, r.key, r.opts.PeerAgent)
	r.net = nr
	if err != nil {
		return fmt.Errorf("%w: %w", errNetwork, err)
	}
	r.env.WireTap = nr.net.WireRootTap
	if no, ok := r.opts.Observer.(NetworkObserver); ok {
		no.NetworkReady(r.id, nr.net)
	}
	return nil
}

// closeNetwork stores the peer's record with the data paths' final
// counters, then takes the network down and stops its peer, whatever
// ctx: an interrupt must not leave the NIC or the peer's wiring behind.
// Its errors wrap errNetwork.
func (r *run) closeNetwork(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.TeardownTimeout)
	defer cancel()
	var errs []error
	// A network that was never built (its dial or creation failed) has
	// nothing to add to the record of those before it.
	if r.records != nil && r.net.net != nil {
		r.records[scenario.PeerName] = r.netRecord()
		if err := r.opts.Store.SetRunGuests(ctx, r.id, r.records); err != nil {
			errs = append(errs, fmt.Errorf("record network: %w", err))
		}
		r.pastNet = r.records[scenario.PeerName].Details
	}
	if err := r.net.close(ctx); err != nil {
		errs = append(errs, err)
	}
	r.net = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errNetwork, err)
	}
	return nil
}

// netRecord is the peer's stored record: the network's description,
// following those of the networks the run has taken down already. When
// each phase has a network (a path on a dedicated NIC), each network's
// own host side is described under its path.
func (r *run) netRecord() store.GuestRecord {
	rec := r.net.record()
	if !r.plan.NetworkPerPhase() {
		return rec
	}
	path := rec.Details["paths"]
	d := maps.Clone(r.pastNet)
	if d == nil {
		d = map[string]string{}
	}
	for k, v := range rec.Details {
		if k == "host_side" || strings.HasPrefix(k, "host_side.") {
			k = "path." + path + "." + k
		}
		d[k] = v
	}
	if past := r.pastNet["paths"]; past != "" {
		d["paths"] = past + "," + path
	}
	rec.Details = d
	return rec
}

// runSteps interleaves the runs' steps: step i of each run in turn, the
// order reversed every other step.
func runSteps(ctx context.Context, runs []*run, phase int, progress Progress) error {
	total := 0
	for _, r := range runs {
		for _, st := range r.plan.Steps {
			if st.Phase == phase {
				total++
			}
		}
	}
	name := "measure"
	switch ph := runs[0].plan.Phases[phase]; ph.Kind {
	case scenario.PhaseFleetSize:
		name = fmt.Sprintf("measure at fleet size %d", ph.FleetSize)
	case scenario.PhasePath:
		name = fmt.Sprintf("measure on %s over %s", ph.Path, runs[0].plan.Spec.Network.Uplink)
	}
	progress.Phase(name, total)
	for i := 0; ; i++ {
		order := runs
		if i%2 == 1 {
			order = reversed(runs)
		}
		more := false
		for _, r := range order {
			if i >= len(r.plan.Steps) {
				continue
			}
			more = true
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			if err := r.stoppedByStore(); err != nil {
				return fmt.Errorf("%sstopped: %w", r.label, err)
			}
			st := r.plan.Steps[i]
			if st.Phase != phase {
				continue
			}
			if st.Together != nil {
				err := r.measuringLoad(ctx, st, "", func() error { return r.runTogether(ctx, st) })
				progress.Item(r.label+describe(st), err)
				r.extendIfImprecise(ctx, i, progress)
				continue
			}
			g, ok := r.guests[st.Guest]
			kind := ""
			if ok {
				kind = g.Spec().Kind
			}
			done := r.opts.Observer.StepStarted(StepEvent{RunID: r.id, Guest: st.Guest, Group: st.Group, Kind: kind,
				WorkloadID: st.WorkloadID, Workload: st.Workload, Params: st.Params, Repetition: st.Repetition, Warmup: st.Warmup})
			if !ok {
				err := errors.New("guest not running")
				done(err)
				progress.Item(r.label+describe(st), err)
				continue
			}
			err := r.measuringLoad(ctx, st, st.Guest, func() error {
				stopNoise := r.startNoise(ctx, st)
				defer stopNoise()
				return r.runStep(ctx, g, st)
			})
			done(err)
			progress.Item(r.label+describe(st), err)
			r.extendIfImprecise(ctx, i, progress)
		}
		extendPairIfUndecided(ctx, runs, i, phase, progress)
		if !more {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return nil
}

func reversed(runs []*run) []*run {
	out := make([]*run, len(runs))
	for i, r := range runs {
		out[len(runs)-1-i] = r
	}
	return out
}

// startGuests starts the named guests of the plan, a bounded number at a
// time, recording each one's start and how long after the first call it
// was ready.
func (r *run) startGuests(ctx context.Context, names []string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var planned []scenario.PlannedGuest
	for _, pg := range r.plan.Guests {
		if want[pg.Spec.Name] {
			planned = append(planned, pg)
		}
	}
	r.opts.Progress.Phase(r.label+"start guests", len(planned))
	records := r.records
	env := r.env
	began := time.Now()
	r.launched = map[string]time.Duration{}
	var mu sync.Mutex
	sem := make(chan struct{}, r.opts.StartConcurrency)
	var wg sync.WaitGroup
	for _, pg := range planned {
		spec := r.startSpec(pg)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			observed := r.opts.Observer.GuestStarting(guestEvent(r.id, pg.Group, spec, nil))
			g, err := r.startGuest(ctx, spec, env)
			observed(guestEvent(r.id, pg.Group, spec, g), err)
			rec := store.GuestRecord{Group: pg.Group, Kind: spec.Kind, Runtime: spec.Runtime, CPUs: spec.CPUs, Memory: spec.MemoryBytes, CPULimit: spec.CPULimit}
			mu.Lock()
			defer mu.Unlock()
			if err == nil && r.net != nil {
				// Its network's view is made now, with its address there.
				if err = r.net.joined(pg.Spec.Name, g); err != nil {
					err = errors.Join(err, g.Stop(context.WithoutCancel(ctx)))
				}
			}
			if err != nil {
				r.failure(ctx, pg.Spec.Name, pg.Group, "", -1, err, nil)
			} else {
				info := g.Info()
				rec.BootNS, rec.Details = info.BootTime.Nanoseconds(), info.Details
				if info.AgentAddr != "" {
					rec.Details = mergeDetails(rec.Details, map[string]string{"agent_addr": info.AgentAddr})
				}
				if r.net != nil {
					rec.Details = mergeDetails(rec.Details, r.net.guestDetails(pg.Spec.Name))
				}
				rec.Details = mergeDetails(rec.Details, r.placed.details[pg.Spec.Name])
				if img, ok := r.opts.Images[pg.Spec.Image]; ok && img.Digest != "" {
					rec.Details = mergeDetails(rec.Details, map[string]string{"image": pg.Spec.Image, "image_digest": img.Digest})
				}
				if pg.Spec.MemoryMerge && r.ksm != nil {
					rec.Details = mergeDetails(rec.Details, map[string]string{"ksm": ksm.Settings()})
				}
				r.launched[pg.Spec.Name] = time.Since(began)
				if info.Runtime != "" {
					rec.Runtime = info.Runtime
				}
				r.guests[pg.Spec.Name] = g
			}
			records[pg.Spec.Name] = rec
			r.opts.Progress.Item(pg.Spec.Name, err)
		}()
	}
	wg.Wait()
	if r.net != nil {
		records[scenario.PeerName] = r.netRecord()
		maps.Copy(records, r.net.ownRecords())
	}
	if err := r.opts.Store.SetRunGuests(context.WithoutCancel(ctx), r.id, records); err != nil {
		return fmt.Errorf("record guests: %w", r.storeFailed(err))
	}
	if len(r.guests) == 0 && ctx.Err() == nil {
		return ErrNoGuests
	}
	if len(r.launched) < len(planned) && ctx.Err() == nil && r.plan.Spec.Fleet != nil && r.plan.Spec.Fleet.AllOrNothing {
		return fmt.Errorf("%w: %d of %d guests started", errAllOrNothing, len(r.launched), len(planned))
	}
	return nil
}

// startSpec is what a guest of the plan starts as: its spec in the plan,
// where the run placed it, and how it joins the network of the phase.
func (r *run) startSpec(pg scenario.PlannedGuest) guest.Spec {
	spec := r.placed.on(pg.Spec)
	if r.net != nil {
		spec = r.net.on(spec)
	}
	return spec
}

// startGuest starts a guest of the run, from the image it names.
func (r *run) startGuest(ctx context.Context, spec guest.Spec, env guest.Env) (guest.Guest, error) {
	agentBinary := r.opts.AgentBinary
	if v := (image.Variant{Arch: spec.Arch, KernelFlavour: spec.KernelFlavour}); !v.Default() {
		a, ok := r.opts.Variants[v]
		if !ok {
			return nil, fmt.Errorf("vfleet's image (%s) was not prepared for the run", v)
		}
		env.RootFS, env.AgentPath, agentBinary = a.RootFS, a.AgentPath, a.AgentBinary
	}
	if spec.Image != "" {
		img, ok := r.opts.Images[spec.Image]
		if !ok {
			return nil, fmt.Errorf("image %s was not prepared for the run", spec.Image)
		}
		if img.RootFS != "" {
			env.RootFS, env.ImageEnv = img.RootFS, img.Env
		}
		env.AgentBinary = agentBinary
	}
	return startGuest(ctx, spec, env)
}

func startGuest(ctx context.Context, spec guest.Spec, env guest.Env) (guest.Guest, error) {
	k, err := guest.Lookup(spec.Kind)
	if err != nil {
		return nil, err
	}
	env.Ledger = env.Ledger.Scoped(spec.Name)
	g, err := k.New(spec, env)
	if err != nil {
		return nil, err
	}
	if err := g.Start(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

func describe(st scenario.Step) string {
	rep := fmt.Sprintf("rep %d", st.Repetition+1)
	if st.Warmup {
		rep = "warm-up"
	}
	who := st.Guest
	if st.Together != nil {
		who = fmt.Sprintf("%d guests together", len(st.Together))
	}
	if st.Noise != "" {
		rep += ", noise " + st.Noise
	}
	return fmt.Sprintf("%s on %s (%s)", st.WorkloadID, who, rep)
}

// runStep executes one step; its error is also recorded as a failure
// unless the run was interrupted.
func (r *run) runStep(ctx context.Context, g guest.Guest, st scenario.Step) error {
	m, err := r.measure(ctx, g, st, 0, 1)
	if err != nil && len(m.parsed) == 0 || st.Warmup {
		return err
	}
	_, rerr := r.record(ctx, g, st, m)
	return errors.Join(err, rerr)
}

// measurement is one guest's outcome of one step.
type measurement struct {
	parsed []workload.Sample
	reply  agent.Reply
	use    *cpuUse // nil for a workload that is not a network one
	// partial: some of the step's metrics failed, so its first sample
	// may not be the workload's headline.
	partial bool
}

// measure runs the step's tool in g, at startAt on the agent's clock (0:
// at once), and parses its output; a failure is recorded. A measurement
// with samples may come with an error: some metrics failed.
// stretch (at least 1) multiplies the tool's time limit: guests sharing
// CPUs each run their tool that many times slower.
func (r *run) measure(ctx context.Context, g guest.Guest, st scenario.Step, startAt int64, stretch float64) (measurement, error) {
	name, group := g.Spec().Name, r.records[g.Spec().Name].Group
	w, err := workload.Lookup(st.Workload)
	if err != nil {
		return measurement{}, err
	}
	if why := r.unsupported.of(group, st.WorkloadID); why != nil {
		return measurement{}, why
	}
	reply, use, err := r.exec(ctx, g, w, st, startAt, stretch)
	if ctx.Err() != nil {
		return measurement{}, ctx.Err()
	}
	if err == nil && !reply.Succeeded() {
		err = execError(reply)
		if ex, ok := w.(workload.Explainer); ok {
			if why := ex.Explain(reply.Stdout, reply.Stderr); why != nil {
				err = why
			}
		}
	}
	if err != nil {
		return measurement{}, r.failure(ctx, name, group, st.WorkloadID, st.Repetition, withCuts(err, reply), reply.Stderr)
	}
	parsed, err := workload.ParseOutput(w, st.Params, reply.Stdout, reply.Stderr)
	if err != nil {
		err = r.failure(ctx, name, group, st.WorkloadID, st.Repetition, withCuts(err, reply), reply.Stderr)
		if len(parsed) == 0 || errors.Is(err, ErrStore) {
			return measurement{}, err
		}
	}
	// With an error, the step's other metrics were read: the caller stores
	// them, beside the failure of those that were not.
	return measurement{parsed: parsed, reply: reply, use: use, partial: err != nil}, err
}

// record stores a guest's samples of a step and returns them.
func (r *run) record(ctx context.Context, g guest.Guest, st scenario.Step, m measurement) ([]store.Sample, error) {
	spec := g.Spec()
	parsed, params := m.parsed, mergeParams(st.Params, st.Labels)
	if m.use != nil {
		parsed = append(parsed, costSamples(parsed, *m.use)...)
		params = mergeParams(params, r.net.placement(spec.Name))
	}
	now := time.Now().UTC()
	samples := make([]store.Sample, 0, len(parsed))
	for _, p := range parsed {
		samples = append(samples, store.Sample{
			RunID: r.id, Guest: spec.Name, Group: r.records[spec.Name].Group, Kind: spec.Kind, Runtime: g.Info().Runtime,
			WorkloadID: st.WorkloadID, Workload: st.Workload, Params: params, Repetition: st.Repetition,
			Metric: p.Metric, Unit: p.Unit, Value: p.Value, Better: p.Better, Hist: p.Hist, At: now,
			WallNS: m.reply.WallNS, CPUNS: m.reply.Rusage.UserNS + m.reply.Rusage.SysNS,
		})
	}
	if err := r.storeSamples(ctx, samples); err != nil {
		return nil, err
	}
	st.Group = r.records[spec.Name].Group
	if !m.partial {
		r.noteHeadline(st, parsed)
	}
	return samples, nil
}

// exec runs a step's tool in the guest: a network workload through the
// run's network (servers on the peer, CPU use measured around it), any
// other directly. use is nil for a workload that is not a network one.
func (r *run) exec(ctx context.Context, g guest.Guest, w workload.Workload, st scenario.Step, startAt int64, stretch float64) (reply agent.Reply, use *cpuUse, err error) {
	group := r.records[g.Spec().Name].Group
	if nw, ok := w.(workload.Networked); ok {
		if r.net == nil {
			return agent.Reply{}, nil, workload.ErrNeedsNetwork
		}
		if err := r.requireNet(ctx, g, group, nw, st); err != nil {
			return agent.Reply{}, nil, err
		}
		reply, u, err := r.net.exec(ctx, g, nw, st, startAt, stretch)
		return reply, &u, err
	}
	ex, err := w.Command(st.Params, st.Duration)
	if err != nil {
		return agent.Reply{}, nil, err
	}
	for _, prog := range append([]string{ex.Argv[0]}, ex.Runs...) {
		if err := r.tools.require(ctx, g, group, r.imageName(g), prog); err != nil {
			return agent.Reply{}, nil, err
		}
	}
	if ex.WorkDir == "" {
		ex.WorkDir = g.Info().ScratchDir
	}
	if guest.TraitsOf(g.Spec()).Bare && r.placed.hostCPUs != "" {
		ex.Argv = append([]string{"taskset", "--cpu-list", r.placed.hostCPUs}, ex.Argv...)
	}
	reply, err = g.Exec(ctx, agent.Request{Argv: ex.Argv, Dir: ex.WorkDir, TimeoutMS: stretched(ex.Timeout, stretch).Milliseconds(), MaxOutput: ex.MaxOutput,
		StartAtUnixNS: startAt, StopAfterMS: ex.StopAfter.Milliseconds()})
	return reply, nil, err
}

// stretched is a tool's time limit where stretch (at least 1) guests'
// tools share each CPU, each that many times slower than alone.
func stretched(timeout time.Duration, stretch float64) time.Duration {
	return time.Duration(float64(timeout) * max(stretch, 1))
}

func mergeDetails(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func mergeParams(p workload.Params, extra map[string]string) workload.Params {
	return workload.Params(mergeDetails(p, extra))
}

func execError(r agent.Reply) error {
	switch {
	case r.TimedOut:
		return fmt.Errorf("timed out after %s", r.Wall().Round(time.Millisecond))
	case r.Signal != "":
		return fmt.Errorf("killed by signal %s", r.Signal)
	case len(bytes.TrimSpace(r.Stderr)) == 0:
		return fmt.Errorf("exit status %d, nothing on stderr", r.ExitCode)
	default:
		return fmt.Errorf("exit status %d: %s", r.ExitCode, firstLine(r.Stderr))
	}
}

// withCuts adds to a step's failure what the agent dropped of the tool's
// output: what the parser missed may have been there.
func withCuts(err error, r agent.Reply) error {
	if cuts := r.Cuts(); cuts != "" {
		return fmt.Errorf("%w (%s)", err, cuts)
	}
	return err
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// failure stores a failed step (or guest start, with an empty workload) and
// returns err for the caller to report.
func (r *run) failure(ctx context.Context, guestName, group, workloadID string, rep int, err error, stderr []byte) error {
	f := store.Failure{RunID: r.id, Guest: guestName, Group: group, WorkloadID: workloadID, Repetition: rep,
		Error: err.Error(), Stderr: string(stderr), At: time.Now().UTC()}
	r.results.Lock()
	switch {
	case workloadID == "":
		r.failedGuests++
	case errors.Is(err, workload.ErrNotSupported):
		r.unsupportedSteps++
		r.unsupported.set(group, workloadID, err)
	default:
		r.failedSteps++
	}
	r.results.Unlock()
	if serr := r.opts.Store.AddFailure(context.WithoutCancel(ctx), f); serr != nil {
		r.results.Lock()
		r.unsavedFailures = append(r.unsavedFailures, f)
		r.results.Unlock()
		return errors.Join(err, r.storeFailed(serr))
	}
	return err
}

// ErrStore marks a run stopped because the results store refused what it
// measured (a full disk, a database gone read-only): every further step
// would be measured for nothing.
var ErrStore = errors.New("the results store failed")

// storeSamples commits samples as one step's. When the store refuses them
// they are kept for one more try once the run has ended and its guests
// are gone (which frees their disk), and the run stops.
func (r *run) storeSamples(ctx context.Context, samples []store.Sample) error {
	if err := r.opts.Store.AddSamples(context.WithoutCancel(ctx), r.id, samples); err != nil {
		r.results.Lock()
		r.unsaved = append(r.unsaved, samples)
		r.results.Unlock()
		return r.storeFailed(err)
	}
	r.opts.Observer.SamplesStored(r.id, samples)
	return nil
}

// storeFailed remembers the store's first refusal, which stops the run.
func (r *run) storeFailed(err error) error {
	r.results.Lock()
	defer r.results.Unlock()
	if r.storeErr == nil {
		r.storeErr = fmt.Errorf("%w: %w", ErrStore, err)
	}
	return r.storeErr
}

// stoppedByStore returns the store's refusal once there has been one.
func (r *run) stoppedByStore() error {
	r.results.Lock()
	defer r.results.Unlock()
	return r.storeErr
}

// flushUnsaved tries once more to store what the store refused during the
// run, and says what is still lost.
func (r *run) flushUnsaved(ctx context.Context) error {
	r.results.Lock()
	defer r.results.Unlock()
	var lost, lostFailures int
	var firstErr error
	for _, samples := range r.unsaved {
		if err := r.opts.Store.AddSamples(ctx, r.id, samples); err != nil {
			lost += len(samples)
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		r.opts.Observer.SamplesStored(r.id, samples)
	}
	for _, f := range r.unsavedFailures {
		if err := r.opts.Store.AddFailure(ctx, f); err != nil {
			lostFailures++
			firstErr = cmp.Or(firstErr, err)
		}
	}
	r.unsaved, r.unsavedFailures = nil, nil
	if firstErr != nil {
		return fmt.Errorf("%d samples and %d failure records of run %d could not be stored: %w", lost, lostFailures, r.id, firstErr)
	}
	return nil
}

// outcome is the run's final status and why, from how it stopped and what
// failed on the way.
func (r *run) outcome() (status, reason string) {
	r.results.Lock()
	defer r.results.Unlock()
	switch {
	case r.storeErr != nil:
		return store.StatusFailed, r.storeErr.Error()
	case r.status == store.StatusComplete && r.failedSteps+r.failedGuests > 0:
		return store.StatusCompleteWithFailures, fmt.Sprintf("%d failed step(s), %d guest(s) that did not start", r.failedSteps, r.failedGuests)
	case r.status == store.StatusComplete && r.unsupportedSteps > 0:
		return r.status, fmt.Sprintf("%d workload(s) not supported by their guest's kernel", r.unsupportedSteps)
	}
	return r.status, r.reason
}

// stopGuests stops the named running guests in parallel and forgets them.
// What a guest notes of itself as it stops (a detail its record lacks)
// joins its record in the store.
func (r *run) stopGuests(ctx context.Context, names []string) error {
	var errs []error
	noted := map[string]map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	if len(names) > 0 {
		r.opts.Progress.Phase(r.label+"stop guests", len(names))
	}
	for _, name := range names {
		g := r.guests[name]
		if g == nil {
			continue
		}
		delete(r.guests, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.Stop(ctx)
			r.opts.Observer.GuestStopped(guestEvent(r.id, r.records[name].Group, g.Spec(), g), err)
			r.opts.Progress.Item(name, err)
			added := map[string]string{}
			for k, v := range g.Info().Details {
				if _, ok := r.records[name].Details[k]; !ok {
					added[k] = v
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(added) > 0 {
				noted[name] = added
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	for name, added := range noted {
		rec := r.records[name]
		rec.Details = mergeDetails(rec.Details, added)
		r.records[name] = rec
	}
	if len(noted) > 0 {
		if err := r.opts.Store.SetRunGuests(context.WithoutCancel(ctx), r.id, r.records); err != nil {
			errs = append(errs, fmt.Errorf("record guests: %w", r.storeFailed(err)))
		}
	}
	return errors.Join(errs...)
}

func (r *run) teardown(ctx context.Context) (err error) {
	if r.led == nil {
		return nil
	}
	observed := r.opts.Observer.TeardownStarted(r.id)
	defer func() { observed(err) }()
	led, dirEntry := r.led, r.dirEntry
	names := make([]string, 0, len(r.guests))
	for name := range r.guests {
		names = append(names, name)
	}
	var errs []error
	if err := r.stopGuests(ctx, names); err != nil {
		errs = append(errs, err)
	}
	if r.net != nil {
		if err := r.closeNetwork(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.ksm != nil {
		if err := led.Release(ctx, *r.ksm); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.releaseHostSettings(ctx, led); err != nil {
		errs = append(errs, err)
	}
	if err := led.Release(ctx, dirEntry); err != nil {
		errs = append(errs, err)
	}
	if pending := led.Pending(); len(pending) > 0 {
		errs = append(errs, fmt.Errorf("%d resources still recorded in ledger %s (run `vfleet clean`)", len(pending), led.Dir()))
	}
	if err := led.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
