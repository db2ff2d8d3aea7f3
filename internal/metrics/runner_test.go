package metrics

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// fake's guests answer with a recorded sysbench output; their "process"
// is this test process, so the collector has real files to read.
var fake = guesttest.NewFake("fake", func(guest.Spec) guest.Info {
	return guest.Info{Kind: "fake", ScratchDir: "/scratch", PIDs: []int{os.Getpid()}}
})

func init() { guest.Register(fake) }

func TestRunnerFeedsTheCollector(t *testing.T) {
	out, err := os.ReadFile("../workload/testdata/sysbench-cpu.stdout")
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset(out)
	fake.FailExec("other-1")
	spec, err := scenario.Parse("t.yaml", []byte(`name: t
repetitions: 2
warmup: 1
duration: 1s
guests:
  - {name: base, kind: fake}
  - {name: other, kind: fake, count: 2}
baseline: base
workloads:
  - workload: cpu
`), scenario.Options{KnownKinds: []string{"fake"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewRunCollector(Options{})
	id, err := runner.Run(context.Background(), spec.Expand(), runner.Options{
		Store: st, StateRoot: t.TempDir(), Progress: quiet{}, Observer: c})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Samples(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// 3 guests × (1 warm-up + 2 repetitions); other-1's 3 steps fail.
	want := strings.NewReplacer("ID", "1", "SAMPLES", strconv.Itoa(len(stored))).Replace(`
# HELP vfleet_run_failures_total Failed steps and guest starts of the run.
# TYPE vfleet_run_failures_total counter
vfleet_run_failures_total{run="ID",scenario="t"} 3
# HELP vfleet_run_samples_total Samples the run has stored.
# TYPE vfleet_run_samples_total counter
vfleet_run_samples_total{run="ID",scenario="t"} SAMPLES
# HELP vfleet_run_steps_done_total Steps the run has finished, failed ones included.
# TYPE vfleet_run_steps_done_total counter
vfleet_run_steps_done_total{run="ID",scenario="t"} 9
# HELP vfleet_run_steps_total Steps the run's plan has, warm-ups included.
# TYPE vfleet_run_steps_total counter
vfleet_run_steps_total{run="ID",scenario="t"} 9
# HELP vfleet_guest_up 1 while the guest runs; 0 once it is stopped or when it failed to start.
# TYPE vfleet_guest_up gauge
vfleet_guest_up{group="base",guest="base",kind="fake",run="ID",runtime=""} 0
vfleet_guest_up{group="other",guest="other-0",kind="fake",run="ID",runtime=""} 0
vfleet_guest_up{group="other",guest="other-1",kind="fake",run="ID",runtime=""} 0
`)
	if id != 1 || len(stored) == 0 {
		t.Fatalf("run %d stored %d samples", id, len(stored))
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vfleet_run_failures_total", "vfleet_run_samples_total",
		"vfleet_run_steps_done_total", "vfleet_run_steps_total", "vfleet_guest_up"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "vfleet_sample_value"); n != len(stored)/2 {
		t.Errorf("%d sample series for %d samples of 2 repetitions", n, len(stored))
	}
	infos := seriesLabels(t, c, "vfleet_run_info")
	if len(infos) != 1 || infos[0]["status"] != store.StatusCompleteWithFailures || !strings.HasPrefix(infos[0]["key"], "r1-") {
		t.Errorf("run info %v, want one run complete with failures keyed r1-…", infos)
	}
}

// seriesLabels returns the labels of every series of one metric.
func seriesLabels(t *testing.T, c prometheus.Collector, name string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, mf := range gather(t, c) {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}

func gather(t *testing.T, c prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

type quiet struct{}

func (quiet) Phase(string, int)   {}
func (quiet) Item(string, error)  {}
func (quiet) Logf(string, ...any) {}
