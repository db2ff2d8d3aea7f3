package report

import (
	"math"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// execSamples is one execution of a tool that reports a rate and two more
// metrics: three samples, one CPU time.
func execSamples(guest, group, id string, rep int, params workload.Params, rateUnit string, rate float64, wallNS, cpuNS int64) []store.Sample {
	base := store.Sample{Guest: guest, Group: group, Kind: group, WorkloadID: id, Workload: "custom", Params: params, Repetition: rep,
		At: t0, WallNS: wallNS, CPUNS: cpuNS}
	head, lat, errs := base, base, base
	head.Metric, head.Unit, head.Value, head.Better = "rate", rateUnit, rate, workload.HigherIsBetter
	lat.Metric, lat.Unit, lat.Value, lat.Better = "lat", "us", 12, workload.LowerIsBetter
	errs.Metric, errs.Unit, errs.Value, errs.Better = "errors", "count", 0, workload.LowerIsBetter
	return []store.Sample{head, lat, errs}
}

// TestCostCountsEachExecutionOnce: every execution gives three samples
// with the same CPU time. Counted per sample, the CPU time per execution
// would be the same but the executions three times as many; summed per
// execution, three times as much. Two guests of one group, two
// repetitions each: four executions.
func TestCostCountsEachExecutionOnce(t *testing.T) {
	run, _, _ := fixture()
	var samples []store.Sample
	for rep := 0; rep < 2; rep++ {
		for _, g := range []string{"host-0", "host-1"} {
			samples = append(samples, execSamples(g, "host", "e", rep, nil, "events/s", 1000, 2e9, 1e9+int64(rep)*2e8)...)
		}
	}
	c := Build(run, samples, nil)
	if len(c.Cost) != 1 {
		t.Fatalf("cost rows = %+v", c.Cost)
	}
	r := c.Cost[0]
	if r.Executions != 4 || r.CPUSeconds.N != 4 || math.Abs(r.CPUSeconds.Mean-1.1) > 1e-12 || math.Abs(r.WallSeconds.Mean-2) > 1e-12 {
		t.Errorf("executions %d, CPU %+v, wall %+v; want 4 executions of 1.1 s CPU in 2 s", r.Executions, r.CPUSeconds, r.WallSeconds)
	}
	if math.Abs(r.Cores.Mean-0.55) > 1e-12 {
		t.Errorf("cores = %v, want 0.55", r.Cores.Mean)
	}
	// 1.1 s of CPU for 1000 events/s over 2 s: 550 µs per event.
	if pu := r.PerUnit; pu == nil || pu.Unit != "µs/event" || math.Abs(pu.Summary.Mean-550) > 1e-9 || pu.Executions != 4 {
		t.Errorf("per unit = %+v, want 550 µs/event over 4 executions", pu)
	}
	// The same repetition index with other parameters is another execution.
	samples = append(samples, execSamples("host-0", "host", "e", 0, workload.Params{"path": "xdp"}, "events/s", 1000, 2e9, 5e8)...)
	if c := Build(run, samples, nil); len(c.Cost) != 2 || c.Cost[0].Executions != 4 || c.Cost[1].Executions != 1 {
		t.Errorf("another parameter set is another row: %+v", c.Cost)
	}
}

func TestCostPerUnitOfWork(t *testing.T) {
	run, _, _ := fixture()
	for _, tc := range []struct {
		unit       string
		rate       float64
		wall, cpu  int64
		want       float64
		wantUnit   string
		containerX float64 // the container's CPU time relative to the host's
	}{
		// 1 s of CPU for 8 Gbit/s over 2 s, 2 GB: 0.5 CPU s/GB.
		{"bit/s", 8e9, 2e9, 1e9, 0.5, "CPU s/GB", 1.5},
		// 0.5 s for 10000 IOPS over 1 s: 50 µs per IO.
		{"IOPS", 10000, 1e9, 5e8, 50, "µs/IO", 0.8},
		// 0.2 s for 1000 MiB/s over 1 s: 0.2 s per 1000 MiB, per GB 0.2/1.048576.
		{"MiB/s", 1000, 1e9, 2e8, 0.2 / 1.048576, "CPU s/GB", 1},
		// 1 s for 2e6 ops/s over 1 s: 500 ns per op.
		{"ops/s", 2e6, 1e9, 1e9, 500, "ns/op", 2},
		// 3 s for 2 Mflop/s over 1 s: 1.5 s per Mflop.
		{"Mflop/s", 2, 1e9, 3e9, 1.5, "s/Mflop", 1},
	} {
		var samples []store.Sample
		for rep := 0; rep < 3; rep++ {
			samples = append(samples, execSamples("host", "host", "e", rep, nil, tc.unit, tc.rate, tc.wall, tc.cpu)...)
			samples = append(samples, execSamples("container", "container", "e", rep, nil, tc.unit, tc.rate, tc.wall,
				int64(float64(tc.cpu)*tc.containerX))...)
		}
		c := Build(run, samples, nil)
		if len(c.Cost) != 2 || c.Cost[0].Group != "host" || c.Cost[0].PerUnit == nil || c.Cost[1].PerUnit == nil {
			t.Fatalf("%s: cost = %+v", tc.unit, c.Cost)
		}
		host, ctr := c.Cost[0].PerUnit, c.Cost[1].PerUnit
		if host.Unit != tc.wantUnit || math.Abs(host.Summary.Mean-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: %v %s, want %v %s", tc.unit, host.Summary.Mean, host.Unit, tc.want, tc.wantUnit)
		}
		// Both groups in the baseline's unit, whatever the container's size.
		if ctr.Unit != host.Unit || math.Abs(ctr.Summary.Mean-tc.want*tc.containerX) > 1e-9*tc.want {
			t.Errorf("%s: container %v %s, want %v %s", tc.unit, ctr.Summary.Mean, ctr.Unit, tc.want*tc.containerX, host.Unit)
		}
		if host.Ratio == nil || host.Ratio.Ratio != 1 || ctr.Ratio == nil || math.Abs(ctr.Ratio.Ratio-tc.containerX) > 1e-9 {
			t.Errorf("%s: ratios %+v %+v, want 1 and %v", tc.unit, host.Ratio, ctr.Ratio, tc.containerX)
		}
	}
}

func TestCostWithoutARate(t *testing.T) {
	run, _, _ := fixture()
	var samples []store.Sample
	for _, unit := range []string{"us", "bit/s per core", "%"} {
		samples = append(samples, execSamples("host", "host", unit, 0, nil, unit, 5, 1e9, 1e8)...)
	}
	// A rate of zero did no work; a run that never recorded its times has
	// no cost at all.
	samples = append(samples, execSamples("host", "host", "idle", 0, nil, "events/s", 0, 1e9, 1e8)...)
	samples = append(samples, execSamples("host", "host", "old", 0, nil, "events/s", 5, 0, 0)...)
	c := Build(run, samples, nil)
	if len(c.Cost) != 4 {
		t.Fatalf("%d cost rows, want one per entry with times: %+v", len(c.Cost), c.Cost)
	}
	for _, r := range c.Cost {
		if r.PerUnit != nil {
			t.Errorf("%s: a cost per unit of %+v", r.WorkloadID, r.PerUnit)
		}
		if math.Abs(r.CPUSeconds.Mean-0.1) > 1e-12 || math.Abs(r.Cores.Mean-0.1) > 1e-12 {
			t.Errorf("%s: CPU %v s, %v cores; want 0.1 and 0.1", r.WorkloadID, r.CPUSeconds.Mean, r.Cores.Mean)
		}
	}
}

// TestCostBaselineAcrossDataPaths: each group runs on its own data path,
// so its parameters differ from the baseline's; the baseline's only row
// of the entry is still what it is compared with. With two baseline rows
// and no exact match there is nothing to choose between, so no ratio.
func TestCostBaselineAcrossDataPaths(t *testing.T) {
	run, _, _ := fixture()
	var samples []store.Sample
	samples = append(samples, execSamples("host", "host", "tp", 0, workload.Params{"path": "veth"}, "bit/s", 8e9, 1e9, 1e9)...)
	samples = append(samples, execSamples("container", "container", "tp", 0, workload.Params{"path": "xdp"}, "bit/s", 4e9, 1e9, 1e9)...)
	c := Build(run, samples, nil)
	if r := c.Cost[1].PerUnit.Ratio; r == nil || r.Ratio != 2 {
		t.Fatalf("container ratio = %+v, want 2 (half the bits for the same CPU)", r)
	}
	if c.Cost[1].Label() != "container · path=xdp" {
		t.Errorf("label %q", c.Cost[1].Label())
	}
	samples = append(samples, execSamples("host", "host", "tp", 0, workload.Params{"path": "bridge"}, "bit/s", 8e9, 1e9, 1e9)...)
	c = Build(run, samples, nil)
	for _, r := range c.Cost {
		if r.Group == "container" && r.PerUnit.Ratio != nil {
			t.Errorf("ambiguous baseline, yet a ratio: %+v", r.PerUnit.Ratio)
		}
	}
}

func TestParseRateUnit(t *testing.T) {
	for unit, want := range map[string]string{
		"events/s": "ns/event", "ops/s": "ns/op", "bogo ops/s": "ns/bogo op", "IOPS": "µs/IO", "bit/s": "CPU s/GB",
		"MB/s": "CPU s/GB", "Mflop/s": "ns/Mflop", "us": "", "bit/s per core": "", "/s": "", "%": "", "segments": "",
	} {
		wu, ok := parseRateUnit(unit)
		got := ""
		if ok {
			got, _ = wu.display(1e-9)
		}
		if got != want {
			t.Errorf("parseRateUnit(%q) reads as %q, want %q", unit, got, want)
		}
	}
	wu, _ := parseRateUnit("events/s")
	for ref, want := range map[float64]string{5e-10: "ns/event", 2e-6: "µs/event", 0.02: "ms/event", 3: "s/event"} {
		if got, _ := wu.display(ref); got != want {
			t.Errorf("display(%v) = %q, want %q", ref, got, want)
		}
	}
}

func TestCostInTheTable(t *testing.T) {
	run, samples, failures := fullFixture()
	var buf strings.Builder
	if err := WriteTable(&buf, Build(run, samples, failures), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(buf.String(), "\ntool CPU: ")
	if !ok || !strings.Contains(block, "softirq") {
		t.Fatalf("no tool CPU block:\n%s", buf.String())
	}
	// tcp-64 on the host: 2.95 s of CPU for 2.12 Gbit/s over 3.05 s.
	want := formatValue(2.95/(2.12e9*3.05/8)*1e9) + " CPU s/GB"
	if !strings.Contains(block, want) {
		t.Errorf("block lacks %q:\n%s", want, block)
	}
}
