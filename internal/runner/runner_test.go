package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostset"
	"github.com/vfleet/vfleet/internal/ledger"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// fake stands in for a real isolation kind: its guests answer with a
// recorded sysbench output.
var fake = guesttest.NewFake("fake", func(guest.Spec) guest.Info { return guest.Info{Kind: "fake", ScratchDir: "/scratch"} })

func init() { guest.Register(fake) }

func reset(t *testing.T) {
	out, err := os.ReadFile("../workload/testdata/sysbench-cpu.stdout")
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset(out)
}

const fakeScenario = `name: t
repetitions: 2
warmup: 1
duration: 1s
guests:
  - {name: base, kind: fake}
  - {name: other, kind: fake, count: 2}
baseline: base
workloads:
  - workload: cpu
`

type silent struct{}

func (silent) Phase(string, int)   {}
func (silent) Item(string, error)  {}
func (silent) Logf(string, ...any) {}

// fakePlan is the plan of a scenario of fake guests.
func fakePlan(t *testing.T, text string) *scenario.Plan {
	t.Helper()
	spec, err := scenario.Parse("t.yaml", []byte(text), scenario.Options{KnownKinds: []string{"fake"}})
	if err != nil {
		t.Fatal(err)
	}
	return quickIdle(spec).Expand()
}

// quickIdle shortens a fleet's idle footprint window: fakes do nothing
// while idle.
func quickIdle(spec *scenario.Spec) *scenario.Spec {
	if spec.Fleet != nil {
		spec.Fleet.Idle = 10 * time.Millisecond
	}
	return spec
}

func setup(t *testing.T) (*scenario.Plan, Options) {
	reset(t)
	plan := fakePlan(t, fakeScenario)
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return plan, Options{Store: st, StateRoot: t.TempDir(), Progress: silent{}}
}

func TestRunStoresMeasuredSamplesAndDiscardsWarmups(t *testing.T) {
	plan, opts := setup(t)
	fake.FailExec("other-1")
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, _ := opts.Store.GetRun(ctx, id)
	if run.Status != store.StatusCompleteWithFailures || run.StatusReason != "3 failed step(s), 0 guest(s) that did not start" ||
		run.Finished.IsZero() || len(run.Guests) != 3 || run.Baseline != "base" {
		t.Fatalf("run = %+v", run)
	}
	samples, _ := opts.Store.Samples(ctx, id)
	// 2 working guests x 2 measured repetitions; warm-ups discarded.
	if len(samples) != 4 {
		t.Fatalf("%d samples, want 4: %+v", len(samples), samples)
	}
	s := samples[0]
	if s.Metric != "events_per_sec" || s.Value != 4283.31 || s.Guest != "base" || s.Group != "base" || s.CPUNS != 15e8 || s.WallNS != 2e9 || s.Params["threads"] != "1" {
		t.Fatalf("sample = %+v", s)
	}
	failures, _ := opts.Store.Failures(ctx, id)
	// The failing guest fails its warm-up and both repetitions, and the run goes on.
	if len(failures) != 3 || failures[0].Guest != "other-1" || !strings.Contains(failures[0].Stderr, "out of luck") {
		t.Fatalf("failures = %+v", failures)
	}
	audits, _ := opts.Store.Audits(ctx, id)
	if len(audits) != 4 || audits[0].Guest != "" || audits[1].Guest != "base" || audits[1].Group != "base" || len(audits[1].Evidence) == 0 {
		t.Fatalf("audits = %+v, want the host's and each guest's", audits)
	}
	// The host's load is read around every measured step, a failed one
	// too (it ran), never a warm-up.
	loads, err := opts.Store.StepLoads(ctx, id)
	if err != nil || len(loads) != 6 || loads[0].Guest != "base" || loads[0].WorkloadID != "cpu" || loads[0].CPUs < 1 || loads[0].TotalTicks < 0 {
		t.Fatalf("loads = %+v, %v; want one per measured step", loads, err)
	}
	stopped := fake.Stopped()
	for name, n := range fake.Started() {
		if stopped[name] != n {
			t.Errorf("guest %s started %d times, stopped %d", name, n, stopped[name])
		}
	}
	assertNoState(t, opts.StateRoot)
}

// A noise guest whose image lacks the aggressors' program says so, as a
// failure of the step it should have disturbed, which is still measured.
func TestMissingAggressorIsNamed(t *testing.T) {
	_, opts := setup(t)
	fake.Lacks("stress-ng")
	plan := fakePlan(t, strings.Replace(fakeScenario, "warmup: 1\n", "warmup: 0\nnoise: {profiles: [cpu], on: other, cpus: \"1\"}\n", 1))
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures, _ := opts.Store.Failures(context.Background(), id)
	if len(failures) == 0 || !strings.Contains(failures[0].Error, "noise cpu: missing tool: stress-ng is not in vfleet's image") {
		t.Fatalf("failures = %+v, want the missing aggressor named", failures)
	}
	if samples, _ := opts.Store.Samples(context.Background(), id); len(samples) == 0 {
		t.Error("the disturbed step was not measured")
	}
}

// A step whose tool the image lacks fails saying so, in every guest,
// without running anything; the run goes on.
func TestMissingToolFailsItsStepsByName(t *testing.T) {
	plan, opts := setup(t)
	fake.Lacks("sysbench")
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures, _ := opts.Store.Failures(context.Background(), id)
	if len(failures) != 9 {
		t.Fatalf("%d failures, want every step of 3 guests: %+v", len(failures), failures)
	}
	if f := failures[0]; f.Error != "missing tool: sysbench is not in vfleet's image" {
		t.Errorf("failure = %q", f.Error)
	}
}

// A step that fails on an output the agent cut says so, and where.
func TestCutOutputIsNamedInTheStepsFailure(t *testing.T) {
	_, opts := setup(t)
	plan := fakePlan(t, strings.Replace(fakeScenario, "  - workload: cpu\n", `  - workload: command
    params:
      argv: [mybench]
      metrics:
        - {name: score, unit: score, better: higher, regex: 'score: (\d+)'}
`, 1))
	fake.CutOutput(agent.Cut{At: 10, Dropped: 90, Total: 200})
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures, _ := opts.Store.Failures(context.Background(), id)
	const cut = "(output was cut: stdout's bytes 10 to 100 of 200 dropped, its beginning and end kept)"
	if len(failures) == 0 || !strings.Contains(failures[0].Error, "matches nothing in the output") || !strings.HasSuffix(failures[0].Error, cut) {
		t.Fatalf("failures = %+v, want a parse error ending %q", failures, cut)
	}
}

// A group whose kernel lacks what a workload needs is told so once: its
// other steps of that workload are not run, and the run is no failure.
func TestWorkloadTheKernelCannotRunIsNotSupportedOnce(t *testing.T) {
	text := strings.NewReplacer("repetitions: 2", "repetitions: 3", "warmup: 1", "warmup: 0", "workload: cpu", "workload: osnoise").Replace(fakeScenario)
	_, opts := setup(t)
	plan := fakePlan(t, text)
	noTracer, err := os.ReadFile("../workload/testdata/rtla-osnoise-no-tracer.stderr")
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile("../workload/testdata/rtla-osnoise-top-rt-vm.stdout")
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset(table)
	fake.FailExecSaying("other-0", noTracer)
	var execs atomic.Int32
	fake.OnExec(func(name string) {
		if name == "other-0" || name == "other-1" {
			execs.Add(1)
		}
	})
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := opts.Store.GetRun(context.Background(), id)
	if run.Status != store.StatusComplete || !strings.Contains(run.StatusReason, "1 workload(s) not supported") {
		t.Errorf("run %s (%s), want complete with the workload not supported", run.Status, run.StatusReason)
	}
	failures, _ := opts.Store.Failures(context.Background(), id)
	if len(failures) != 1 || failures[0].Group != "other" || !strings.Contains(failures[0].Error, "not supported in this guest: this kernel has no osnoise tracer") {
		t.Fatalf("failures = %+v, want the group's one refusal", failures)
	}
	// other-0 tried once, then neither guest of the group ran it again.
	if n := execs.Load(); n != 1 {
		t.Errorf("the group's guests ran the refused workload %d times, want once", n)
	}
}

func TestGuestThatFailsToStartIsRecordedAndSkipped(t *testing.T) {
	plan, opts := setup(t)
	fake.FailBoot("other-0")
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures, _ := opts.Store.Failures(context.Background(), id)
	if len(failures) != 1 || failures[0].WorkloadID != "" || !strings.Contains(failures[0].Error, "boot failed") {
		t.Fatalf("failures = %+v", failures)
	}
	if run, _ := opts.Store.GetRun(context.Background(), id); run.Status != store.StatusCompleteWithFailures {
		t.Fatalf("status = %s, want %s", run.Status, store.StatusCompleteWithFailures)
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	if len(samples) != 4 {
		t.Fatalf("%d samples, want 4", len(samples))
	}
}

func TestInterruptedRunKeepsSamplesAndTearsDown(t *testing.T) {
	plan, opts := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	execs := 0
	fake.OnExec(func(string) {
		execs++
		if execs == 6 { // after the warm-ups and the first measured round
			cancel()
		}
	})
	id, err := Run(ctx, plan, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	run, _ := opts.Store.GetRun(context.Background(), id)
	if run.Status != store.StatusIncomplete || run.StatusReason != "interrupted" || run.Finished.IsZero() {
		t.Fatalf("run = %+v", run)
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	if len(samples) != 2 {
		t.Fatalf("%d samples kept, want the 2 measured before the interrupt", len(samples))
	}
	if stopped := fake.Stopped(); len(stopped) != 3 {
		t.Fatalf("stopped = %v, want all 3 guests", stopped)
	}
	assertNoState(t, opts.StateRoot)
}

func TestNoGuestAtAllFailsTheRun(t *testing.T) {
	plan, opts := setup(t)
	for _, g := range []string{"base", "other-0", "other-1"} {
		fake.FailBoot(g)
	}
	id, err := Run(context.Background(), plan, opts)
	if !errors.Is(err, ErrNoGuests) {
		t.Fatalf("err = %v, want ErrNoGuests", err)
	}
	run, _ := opts.Store.GetRun(context.Background(), id)
	if run.Status != store.StatusFailed {
		t.Fatalf("status = %s", run.Status)
	}
}

// assertNoState checks that the run removed its state directory and ledger.
func assertNoState(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"runs", "ledger"} {
		entries, _ := os.ReadDir(filepath.Join(root, d))
		if len(entries) != 0 {
			t.Errorf("%s/ still holds %d entries after the run", d, len(entries))
		}
	}
}

type recorder struct {
	mu    sync.Mutex
	items []string
}

func (r *recorder) Phase(string, int) {}
func (r *recorder) Item(desc string, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, desc)
}
func (r *recorder) Logf(string, ...any) {}

func TestRunABAlternatesStepOrder(t *testing.T) {
	planA, opts := setup(t)
	planB, _ := setup(t)
	rec := &recorder{}
	opts.Progress = rec
	ids, err := RunAB(context.Background(), planA, planB, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == ids[1] || ids[0] == 0 {
		t.Fatalf("ids = %v", ids)
	}
	var steps []string
	for _, it := range rec.items {
		if strings.Contains(it, " on ") {
			steps = append(steps, it[:1])
		}
	}
	// Each plan has 9 steps (3 guests x (1 warm-up + 2 reps)); step i of A
	// and B run back to back, their order flipping every step.
	if got := strings.Join(steps[:6], ""); got != "ABBAAB" {
		t.Fatalf("step order = %s, want ABBAAB…", strings.Join(steps, ""))
	}
	for _, id := range ids {
		run, _ := opts.Store.GetRun(context.Background(), id)
		samples, _ := opts.Store.Samples(context.Background(), id)
		if run.Status != store.StatusComplete || len(samples) != 6 {
			t.Errorf("run %d: status %s, %d samples; want complete, 6", id, run.Status, len(samples))
		}
	}
	assertNoState(t, opts.StateRoot)
}

func adaptivePlan(t *testing.T, opts Options) *scenario.Plan {
	t.Helper()
	return fakePlan(t, strings.Replace(fakeScenario, "repetitions: 2\n", "repetitions: 2\nadaptive: {target: 5%, max_repetitions: 5}\n", 1))
}

func repetitionsPerGuest(t *testing.T, opts Options, id int64) map[string]int {
	t.Helper()
	samples, err := opts.Store.Samples(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	reps := map[string]int{}
	for _, s := range samples {
		reps[s.Guest] = max(reps[s.Guest], s.Repetition+1)
	}
	return reps
}

func TestAdaptiveRepetitionsStopWhenPrecise(t *testing.T) {
	_, opts := setup(t)
	id, err := Run(context.Background(), adaptivePlan(t, opts), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Identical outputs: the interval has no width after the minimum.
	for g, n := range repetitionsPerGuest(t, opts, id) {
		if n != 2 {
			t.Errorf("guest %s ran %d repetitions, want the minimum 2", g, n)
		}
	}
}

func TestAdaptiveRepetitionsGoOnWhileNoisyUpToTheMaximum(t *testing.T) {
	_, opts := setup(t)
	steady := fake.Output()
	noisy := []byte(strings.Replace(string(steady), "4283.31", "2000.00", 1))
	calls := 0
	fake.OnExec(func(g string) {
		// Only the "other" group is noisy; base stays precise.
		if strings.HasPrefix(g, "other") {
			calls++
			if calls%2 == 0 {
				fake.SetOutput(noisy)
				return
			}
		}
		fake.SetOutput(steady)
	})
	id, err := Run(context.Background(), adaptivePlan(t, opts), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"base": 5, "other-0": 5, "other-1": 5}
	if got := repetitionsPerGuest(t, opts, id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("repetitions = %v, want %v: every guest repeats while one group is imprecise, up to the maximum", got, want)
	}
}

// MoreRounds adds rounds without an adaptive target, as long as it gives
// a reason, and is asked, once the scenario's repetitions are measured,
// with the run's samples so far in the store.
func TestMoreRoundsAddRoundsWhileAsked(t *testing.T) {
	plan, opts := setup(t)
	var asked []int
	opts.MoreRounds = func(ctx context.Context, runID int64, workloadID string, done int) string {
		asked = append(asked, done)
		samples, err := opts.Store.Samples(ctx, runID)
		if err != nil || len(samples) != 3*done || workloadID != "cpu" {
			t.Errorf("asked after %d rounds of %s: %d samples stored (%v), want %d", done, workloadID, len(samples), err, 3*done)
		}
		if done < 4 {
			return "undecided"
		}
		return ""
	}
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"base": 4, "other-0": 4, "other-1": 4}
	if got := repetitionsPerGuest(t, opts, id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("repetitions = %v, want %v", got, want)
	}
	if fmt.Sprint(asked) != "[2 3 4]" {
		t.Errorf("asked after %v rounds, want after each of [2 3 4]", asked)
	}
}

// In an A/B run, MoreRoundsAB adds a round to both runs while asked, each
// time both have measured the same rounds, so they stay interleaved.
func TestMoreRoundsABAddsRoundsToBoth(t *testing.T) {
	planA, opts := setup(t)
	planB, _ := setup(t)
	rec := &recorder{}
	opts.Progress = rec
	var asked []int
	opts.MoreRoundsAB = func(ctx context.Context, ids [2]int64, workloadID string, done int) string {
		asked = append(asked, done)
		for _, id := range ids {
			samples, err := opts.Store.Samples(ctx, id)
			if err != nil || len(samples) != 3*done || workloadID != "cpu" {
				t.Errorf("run %d asked after %d rounds of %s: %d samples stored (%v), want %d", id, done, workloadID, len(samples), err, 3*done)
			}
		}
		if done < 4 {
			return "undecided"
		}
		return ""
	}
	ids, err := RunAB(context.Background(), planA, planB, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"base": 4, "other-0": 4, "other-1": 4}
	for _, id := range ids {
		if got := repetitionsPerGuest(t, opts, id); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("run %d: repetitions = %v, want %v", id, got, want)
		}
	}
	if fmt.Sprint(asked) != "[2 3 4]" {
		t.Errorf("asked after %v rounds, want after each of [2 3 4]", asked)
	}
	var steps []string
	for _, it := range rec.items {
		if strings.Contains(it, " on ") {
			steps = append(steps, it[:1])
		}
	}
	// The added rounds alternate as the planned ones do.
	if got := strings.Join(steps, ""); strings.Count(got, "A") != strings.Count(got, "B") || strings.Contains(got, "AAA") || strings.Contains(got, "BBB") {
		t.Errorf("step order = %s", got)
	}
}

// host_settings hold while the run lasts, are recorded with the host it
// measured, and the host's own come back; an interrupt the kernel keeps
// where it is does not stop the run.
func TestHostSettingsHeldWhileTheRunLasts(t *testing.T) {
	proc := t.TempDir()
	files := map[string]string{"sys/kernel/sched_rt_runtime_us": "950000", "irq/24/smp_affinity_list": "0-1", "irq/25/smp_affinity_list": "1"}
	for name, v := range files {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An interrupt whose affinity the kernel refuses to move: a directory
	// in place of its file cannot be written.
	if err := os.MkdirAll(filepath.Join(proc, "irq/0/smp_affinity_list"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := rtSettings
	rtSettings = hostset.Set{Kind: kindRTHold, Dir: proc, State: filepath.Join(t.TempDir(), "rt.json")}
	defer func() { rtSettings = saved }()
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(proc, name))
		return strings.TrimSpace(string(b))
	}
	_, opts := setup(t)
	plan := fakePlan(t, fakeScenario+"host_settings: {rt_runtime_us: -1, irq_affinity: \"0\"}\n")
	var during []string
	fake.OnExec(func(string) {
		during = append(during, read("sys/kernel/sched_rt_runtime_us")+" "+read("irq/24/smp_affinity_list")+" "+read("irq/25/smp_affinity_list"))
	})
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 || during[0] != "-1 0 0" {
		t.Errorf("during the run: %v, want RT throttling off and both interrupts on CPU 0", during)
	}
	for name, v := range files {
		if got := read(name); got != v {
			t.Errorf("after the run %s = %s, want the host's %s", name, got, v)
		}
	}
	run, _ := opts.Store.GetRun(context.Background(), id)
	set := strings.Join(run.Host.RealTime.SetByRun, "; ")
	if !strings.Contains(set, "sched_rt_runtime_us=-1") || !strings.Contains(set, "2 interrupts moved, 1 kept where they are by the kernel: 0") {
		t.Errorf("recorded as set by the run: %q", set)
	}
	if _, err := os.Stat(rtSettings.State); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("hold state left: %v", err)
	}
}

// A run that died holding host_settings is ended by `vfleet clean`, which
// puts the host's values back through the undo this package registers.
func TestCleanPutsHostSettingsBackAfterACrash(t *testing.T) {
	proc := t.TempDir()
	file := filepath.Join(proc, "sys/kernel/sched_rt_runtime_us")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("950000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := hostset.Set{Kind: kindRTHold, Dir: proc, State: filepath.Join(t.TempDir(), "rt.json")}
	root := t.TempDir()
	led, err := ledger.Create(root, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := set.Hold(context.Background(), led, "crashed", []hostset.Setting{{Name: "sys/kernel/sched_rt_runtime_us", Value: "-1"}}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != "-1" {
		t.Fatalf("held: %s", b)
	}
	if _, err := ledger.Clean(context.Background(), root, ledger.CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != "950000" {
		t.Errorf("after clean: %s, want the host's 950000", b)
	}
}

// failedItems is a progress display that keeps the errors of its items.
type failedItems struct {
	silent
	mu   sync.Mutex
	errs []error
}

func (f *failedItems) Item(_ string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.errs = append(f.errs, err)
	}
}

// A metric of the user's that cannot be read fails on its own: the step's
// other metrics are stored, and the failure names the one that was not.
func TestAMetricThatCannotBeReadFailsAlone(t *testing.T) {
	_, opts := setup(t)
	progress := &failedItems{}
	opts.Progress = progress
	fake.Reset([]byte(`{"a": 2.5, "b": 1e999}`))
	plan := fakePlan(t, `name: t
repetitions: 1
warmup: 0
duration: 1s
guests:
  - {name: base, kind: fake}
baseline: base
workloads:
  - workload: command
    params:
      argv: [bench]
      metrics:
        - {name: a, unit: u, better: higher, json: $.a}
        - {name: b, unit: u, better: higher, json: $.b}
`)
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if run, _ := opts.Store.GetRun(ctx, id); run.Status != store.StatusCompleteWithFailures {
		t.Errorf("status %q, want %q", run.Status, store.StatusCompleteWithFailures)
	}
	samples, _ := opts.Store.Samples(ctx, id)
	if len(samples) != 1 || samples[0].Metric != "a" || samples[0].Value != 2.5 {
		t.Errorf("samples = %+v, want metric a alone", samples)
	}
	failures, _ := opts.Store.Failures(ctx, id)
	if len(failures) != 1 || !strings.Contains(failures[0].Error, "metric b: $.b selects 1e999, a number out of range") {
		t.Errorf("failures = %+v, want metric b's", failures)
	}
	if len(progress.errs) != 1 || !strings.Contains(progress.errs[0].Error(), "metric b") {
		t.Errorf("progress errors = %v, want the step shown failed", progress.errs)
	}
}

// noting is a fake kind whose guests note a detail of themselves as they
// stop, as a VM copying a user's domain notes that the domain ran.
var noting = func() *guesttest.Fake {
	var f *guesttest.Fake
	f = guesttest.NewFake("noting", func(s guest.Spec) guest.Info {
		info := guest.Info{Kind: "noting", ScratchDir: "/scratch", Details: map[string]string{"at_start": "1"}}
		if f.Stopped()[s.Name] > 0 {
			info.Details["noted_at_stop"] = "it ran"
		}
		return info
	})
	return f
}()

func init() { guest.Register(noting) }

// TestRunRecordsWhatAGuestNotesAsItStops: a detail a guest's record lacks
// when the guest stops joins the stored record.
func TestRunRecordsWhatAGuestNotesAsItStops(t *testing.T) {
	_, opts := setup(t)
	noting.Reset(fake.Output())
	spec, err := scenario.Parse("t.yaml", []byte(`name: t
repetitions: 1
duration: 1s
guests:
  - {name: base, kind: fake}
  - {name: n, kind: noting}
baseline: base
workloads:
  - workload: cpu
`), scenario.Options{KnownKinds: []string{"fake", "noting"}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := Run(context.Background(), spec.Expand(), opts)
	if err != nil {
		t.Fatal(err)
	}
	run, err := opts.Store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d := run.Guests["n"].Details; d["noted_at_stop"] != "it ran" || d["at_start"] != "1" {
		t.Errorf("the stopped guest's record: %v", d)
	}
	if _, ok := run.Guests["base"].Details["noted_at_stop"]; ok {
		t.Errorf("a guest that noted nothing: %v", run.Guests["base"].Details)
	}
}
