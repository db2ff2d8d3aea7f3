package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// fleetPlan plans one cpu step in count fake guests of group c (count 0:
// set by the sweep) under the given fleet section.
func fleetPlan(t *testing.T, fleet string, count int) *scenario.Plan {
	t.Helper()
	countField := ""
	if count > 0 {
		countField = fmt.Sprintf(", count: %d", count)
	}
	src := fmt.Sprintf("name: t\nrepetitions: 1\nwarmup: 0\nduration: 1s\nbaseline: c\nfleet: %s\n"+
		"guests:\n  - {name: c, kind: fake%s}\nworkloads:\n  - workload: cpu\n", fleet, countField)
	spec, err := scenario.Parse("t.yaml", []byte(src), scenario.Options{KnownKinds: []string{"fake", "host"}})
	if err != nil {
		t.Fatal(err)
	}
	return quickIdle(spec).Expand()
}

func TestScaleSweepLaunchesEachSizeAfreshAndSumsTheFleet(t *testing.T) {
	_, opts := setup(t)
	plan := fleetPlan(t, `{scale: [1, 3]}`, 0)
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	started, stopped := fake.Started(), fake.Stopped()
	if started["c-0"] != 2 || started["c-1"] != 1 || started["c-2"] != 1 {
		t.Errorf("starts = %v: want c-0 launched for both sizes, c-1 and c-2 for size 3", started)
	}
	for name, n := range started {
		if stopped[name] != n {
			t.Errorf("%s started %d times, stopped %d", name, n, stopped[name])
		}
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	type key struct{ size, guest, metric string }
	got := map[key]float64{}
	for _, s := range samples {
		got[key{s.Params[scenario.LabelFleetSize], s.Guest, s.Metric}] = s.Value
	}
	per := got[key{"3", "c-2", "events_per_sec"}]
	if per == 0 || got[key{"3", "c", "total.events_per_sec"}] != 3*per || got[key{"1", "c", "total.events_per_sec"}] != per {
		t.Errorf("per guest %v, totals %v (size 3) and %v (size 1): want the sum over the fleet", per,
			got[key{"3", "c", "total.events_per_sec"}], got[key{"1", "c", "total.events_per_sec"}])
	}
	if o := got[key{"3", "c", workload.MetricOverlap}]; math.Abs(o-100) > 1 {
		t.Errorf("overlap = %v%%, want ~100%% for runs started together", o)
	}
	for _, size := range []string{"1", "3"} {
		if _, ok := got[key{size, "c", metricGroupReady}]; !ok {
			t.Errorf("no launch time stored for fleet size %s", size)
		}
	}
	if _, ok := got[key{"3", "c-1", metricReady}]; !ok {
		t.Errorf("no per-guest ready time at size 3")
	}
	if _, ok := got[key{"3", "c", metricVfleetCPU}]; !ok {
		t.Errorf("no idle-fleet CPU stored at size 3")
	}
	assertNoState(t, opts.StateRoot)
}

// Rounds added to a sweep stay in the fleet size that asked for them:
// each size gets its own, numbered on from its own repetitions, and no
// step of another size (whose guests are stopped) is repeated.
func TestMoreRoundsStayInTheirPhase(t *testing.T) {
	_, opts := setup(t)
	opts.MoreRounds = func(_ context.Context, _ int64, _ string, done int) string {
		if done < 3 {
			return "undecided"
		}
		return ""
	}
	id, err := Run(context.Background(), fleetPlan(t, `{scale: [1, 2], concurrency: alone}`, 0), opts)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	reps := map[string][]int{}
	for _, s := range samples {
		if s.Metric == "events_per_sec" {
			k := s.Params[scenario.LabelFleetSize] + " " + s.Guest
			reps[k] = append(reps[k], s.Repetition)
		}
	}
	want := map[string][]int{"1 c-0": {0, 1, 2}, "2 c-0": {0, 1, 2}, "2 c-1": {0, 1, 2}}
	if fmt.Sprint(reps) != fmt.Sprint(want) {
		t.Errorf("repetitions by size and guest %v, want %v", reps, want)
	}
	if failures, _ := opts.Store.Failures(context.Background(), id); len(failures) > 0 {
		t.Errorf("failures %+v: a step of a stopped guest ran", failures)
	}
}

// Guests whose clocks are seconds apart must still be asked to start at
// one host moment: the offsets are measured and applied per guest.
func TestTogetherStartsAtOneMomentWhateverTheGuestClocks(t *testing.T) {
	_, opts := setup(t)
	plan := fleetPlan(t, `{concurrency: together}`, 3)
	fake.SetClockSkew("c-0", 5*time.Second)
	fake.SetClockSkew("c-2", -3*time.Second)
	fake.SetStartWait("c-1", 40*time.Millisecond)
	before := time.Now()
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	at := fake.StartedAt()
	if len(at) != 3 {
		t.Fatalf("timed starts = %v, want one per guest", at)
	}
	for name, moment := range at {
		if d := moment.Sub(at["c-1"]).Abs(); d > 5*time.Millisecond {
			t.Errorf("%s asked to start %s apart from c-1", name, d)
		}
		if moment.Before(before) {
			t.Errorf("%s asked to start before the run began", name)
		}
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	var firstRunSpreads int
	for _, s := range samples {
		if s.Metric == workload.MetricStartSkew && s.Value > 5000 {
			t.Errorf("stored start skew %v us, want the offsets corrected and the wait for a CPU left out", s.Value)
		}
		if s.Metric == workload.MetricFirstRunSpread {
			firstRunSpreads++
			if s.Value < 35000 || s.Value > 45000 {
				t.Errorf("stored first-run spread %v us, want c-1's 40 ms wait for a CPU", s.Value)
			}
		}
	}
	if firstRunSpreads == 0 {
		t.Error("no first-run spread stored")
	}
}

func TestAllOrNothingEndsTheRunOnOneFailedStart(t *testing.T) {
	_, opts := setup(t)
	plan := fleetPlan(t, `{all_or_nothing: true}`, 4)
	fake.FailBoot("c-2")
	id, err := Run(context.Background(), plan, opts)
	if !errors.Is(err, errAllOrNothing) {
		t.Fatalf("err = %v, want the all-or-nothing failure", err)
	}
	run, _ := opts.Store.GetRun(context.Background(), id)
	if run.Status != store.StatusFailed {
		t.Errorf("status = %s, want failed", run.Status)
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	for _, s := range samples {
		if s.WorkloadID != workload.LaunchWorkload {
			t.Fatalf("a step ran after a guest failed to start: %+v", s)
		}
	}
	started, stopped := fake.Started(), fake.Stopped()
	if len(started) != 3 {
		t.Errorf("started = %v, want the 3 that could", started)
	}
	for name, n := range started {
		if stopped[name] != n {
			t.Errorf("%s started %d times, stopped %d", name, n, stopped[name])
		}
	}
	assertNoState(t, opts.StateRoot)
}

func TestFleetGoesOnWithTheGuestsThatStarted(t *testing.T) {
	_, opts := setup(t)
	plan := fleetPlan(t, `{concurrency: together}`, 4)
	fake.FailBoot("c-2")
	id, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := opts.Store.Samples(context.Background(), id)
	per, total := 0.0, 0.0
	for _, s := range samples {
		switch s.Metric {
		case "events_per_sec":
			per = s.Value
		case "total.events_per_sec":
			total = s.Value
		}
	}
	if per == 0 || total != 3*per {
		t.Errorf("total %v for per-guest %v: want the 3 running guests summed", total, per)
	}
}
