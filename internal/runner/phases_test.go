package runner

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// phasedFake's guest i tells one phase of its start, i+1 seconds after
// it began, as a pod tells its conditions.
var phasedFake = guesttest.NewFake("phased-fake", func(s guest.Spec) guest.Info {
	i, _ := strconv.Atoi(s.Name[strings.LastIndex(s.Name, "-")+1:])
	return guest.Info{Kind: "phased-fake", ScratchDir: "/scratch", Phases: []guest.Phase{{Name: "Ready", After: time.Duration(i+1) * time.Second}}}
})

func init() { guest.Register(phasedFake) }

// A fleet's launch stores, per group, the tail of each phase of its
// guests' start (P50, P95, P99, max over the group's guests), as
// kube-burner reports a fleet of pods.
func TestLaunchStoresPhasesAndTheirTail(t *testing.T) {
	_, opts := setup(t)
	phasedFake.Reset(fake.Output())
	samples := runScenario(t, opts, `name: t
repetitions: 1
warmup: 0
duration: 1s
baseline: p
fleet: {scale: [4]}
guests:
  - {name: p, kind: phased-fake}
workloads:
  - workload: cpu
`, "phased-fake")
	got := map[string]float64{}
	for _, s := range samples {
		if strings.HasPrefix(s.Metric, metricPhase) {
			got[s.Guest+" "+s.Metric] = s.Value
		}
	}
	want := map[string]float64{
		"p launch.phase.Ready.p50_s": 2, "p launch.phase.Ready.p95_s": 4, "p launch.phase.Ready.p99_s": 4, "p launch.phase.Ready.max_s": 4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (stored %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored %v, want only the group's tail %v", got, want)
	}
}

// runScenario runs a scenario of the given kinds, its idle short, and
// returns its samples.
func runScenario(t *testing.T, opts Options, src string, kinds ...string) []store.Sample {
	t.Helper()
	spec, err := scenario.Parse("t.yaml", []byte(src), scenario.Options{KnownKinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	id, err := Run(context.Background(), quickIdle(spec).Expand(), opts)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := opts.Store.Samples(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

func TestPhaseTailsAreGroupFigures(t *testing.T) {
	for metric, group := range map[string]bool{"launch.phase.Ready_s": false, "launch.phase.Ready.p99_s": true, "launch.phase.PodScheduled.max_s": true, "launch.ready_s": false} {
		if workload.GroupFigure(metric) != group {
			t.Errorf("GroupFigure(%s) = %v", metric, !group)
		}
	}
}
