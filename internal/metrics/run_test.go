package metrics

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/vfleet/vfleet/internal/netpath/fastpath"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func fixedClock() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// exposition renders what a scrape of c returns, in the text format.
func exposition(t testing.TB, c prometheus.Collector) []byte {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	return buf.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exposition differs from %s (rerun with -update after checking):\n%s", path, got)
	}
}

// feed plays a small run through the observer: three guests started (a
// v1 container, a v2 one, the baseline process in its own network
// namespace), one that failed, steps with one failure and one
// interruption, samples of two repetitions, and a guest stopped.
func feed(c *RunCollector) {
	c.RunStarted(runner.RunEvent{ID: 7, Key: "r7-abcdef", Scenario: "demo", Steps: 6, Guests: 4})
	for _, g := range []struct {
		ev  runner.GuestEvent
		err error
	}{
		{runner.GuestEvent{Name: "c-0", Group: "runc", Kind: "container", Runtime: "runc", BootTime: 250 * time.Millisecond, PIDs: []int{9}, Cgroup: "/vfleet/r7-abcdef/c-0"}, nil},
		{runner.GuestEvent{Name: "c-1", Group: "crun", Kind: "container", Runtime: "crun", BootTime: 125 * time.Millisecond, Cgroup: "/vfleet/r7-abcdef/c-1"}, nil},
		{runner.GuestEvent{Name: "base", Group: "base", Kind: "host", BootTime: 5 * time.Millisecond, PIDs: []int{4343, 4242}}, nil},
		{runner.GuestEvent{Name: "vm-0", Group: "vm", Kind: "vm", Runtime: "microvm"}, errors.New("no kvm")},
	} {
		g.ev.RunID = 7
		done := c.GuestStarting(runner.GuestEvent{RunID: 7, Name: g.ev.Name, Group: g.ev.Group, Kind: g.ev.Kind})
		done(g.ev, g.err)
	}
	step := func(guest string, rep int, err error) {
		done := c.StepStarted(runner.StepEvent{RunID: 7, Guest: guest, WorkloadID: "cpu", Repetition: rep})
		done(err)
	}
	step("c-0", 0, nil)
	step("c-1", 0, errors.New("exit status 1: out of luck"))
	step("base", 0, nil)
	step("c-0", 1, nil)
	step("base", 1, context.Canceled)
	sample := func(guest, group string, rep int, v float64) store.Sample {
		return store.Sample{RunID: 7, Guest: guest, Group: group, WorkloadID: "cpu", Workload: "sysbench-cpu",
			Params: workload.Params{"threads": "1", "max-prime": "20000"}, Repetition: rep, Metric: "events_per_second", Unit: "1/s", Value: v}
	}
	c.SamplesStored(7, []store.Sample{sample("c-0", "runc", 0, 1000)})
	c.SamplesStored(7, []store.Sample{sample("base", "base", 0, 1100),
		{RunID: 7, Guest: "base", Group: "base", WorkloadID: "lat", Metric: "latency_p99", Unit: "s", Value: 0.002}})
	c.SamplesStored(7, []store.Sample{sample("c-0", "runc", 1, 990)})
	c.GuestStopped(runner.GuestEvent{RunID: 7, Name: "c-1"}, nil)
	c.NetworkReady(7, fakeDataPaths{"xdp": {Redirected: 1500, Passed: 12, Dropped: 1,
		PassedByReason: map[string]uint64{"not_ipv4": 8, "fib_no_neigh": 4}}})
}

// fakeDataPaths stands in for a run's network.
type fakeDataPaths map[string]fastpath.Counters

func (f fakeDataPaths) DataPathCounters() map[string]fastpath.Counters { return f }

func TestRunExpositionGolden(t *testing.T) {
	c := NewRunCollector(Options{Root: fakeRoot(t), Now: fixedClock})
	feed(c)
	golden(t, "run.golden", exposition(t, c))
}

func TestRunFinishedChangesStatusAndUnreadableGuestCountsAnError(t *testing.T) {
	root := fakeRoot(t)
	c := NewRunCollector(Options{Root: root, Now: fixedClock})
	feed(c)
	c.RunFinished(7, store.StatusIncomplete)
	if err := os.RemoveAll(filepath.Join(root, "sys", "fs", "cgroup", "cpuacct")); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP vfleet_guest_read_errors_total Scrapes at which the guest's usage could not be read (its cgroup or processes were gone).
# TYPE vfleet_guest_read_errors_total counter
vfleet_guest_read_errors_total{group="base",guest="base",kind="host",run="7",runtime=""} 0
vfleet_guest_read_errors_total{group="runc",guest="c-0",kind="container",run="7",runtime="runc"} 1
# HELP vfleet_run_info A run of this process or of the store, always 1; its labels say what it is and its status.
# TYPE vfleet_run_info gauge
vfleet_run_info{key="r7-abcdef",label="",run="7",scenario="demo",status="incomplete"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vfleet_run_info", "vfleet_guest_read_errors_total"); err != nil {
		t.Fatal(err)
	}
	// The cgroup's CPU file is gone, so no value at all rather than a
	// made-up one.
	if n := testutil.CollectAndCount(c, "vfleet_guest_cpu_seconds_total"); n != 1 {
		t.Fatalf("%d cpu series, want 1 (only the baseline)", n)
	}
}
