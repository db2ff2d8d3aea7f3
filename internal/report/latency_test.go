package report

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

func hist(unit string, values ...float64) *stats.Histogram {
	h := stats.NewHistogram(unit)
	for _, v := range values {
		h.Add(v)
	}
	return h
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func rttSample(guest, group string, rep int, params workload.Params, h *stats.Histogram) store.Sample {
	return store.Sample{RunID: 7, Guest: guest, Group: group, Kind: group, WorkloadID: "ping", Workload: "netperf", Params: params,
		Repetition: rep, Metric: "net.rtt_us", Unit: h.Unit(), Value: h.Mean(), Better: workload.LowerIsBetter, At: t0, Hist: h}
}

// fullFixture is fixture() plus a round-trip latency measured with
// a histogram per execution: host and container, each over two data paths,
// three repetitions, 3000 observations each, log-normal around 40 µs
// (veth) and 25 µs (xdp) with the container 15% slower and a tail of 1% at
// ten times the median. The seed is fixed, so the figures are too. It
// also has three iperf3 entries that make two scaling curves (see
// addThroughputEntries).
func fullFixture() (store.Run, []store.Sample, []store.Failure) {
	run, samples, failures := fixture()
	samples = addThroughputEntries(samples)
	rng := rand.New(rand.NewPCG(7, 7))
	for _, path := range []struct {
		name   string
		median float64
	}{{"veth", 40}, {"xdp", 25}} {
		for _, g := range []struct {
			group string
			slow  float64
		}{{"host", 1}, {"container", 1.15}} {
			for rep := 0; rep < 3; rep++ {
				h := stats.NewHistogram("us")
				for i := 0; i < 3000; i++ {
					v := path.median * g.slow * math.Exp(0.25*rng.NormFloat64())
					if rng.IntN(100) == 0 {
						v *= 10
					}
					h.Add(v)
				}
				params := workload.Params{"path": path.name, "threads": "1"}
				samples = append(samples, rttSample(g.group, g.group, rep, params, h))
			}
		}
	}
	return run, samples, failures
}

// TestLatencyMergesNeverAverages: one repetition without a tail and one
// with 4% of its observations at 1 ms. The merged distribution's p99 is
// 1 ms; the average of the two runs' p99s would be about 505 µs, a latency
// nothing was ever measured at.
func TestLatencyMergesNeverAverages(t *testing.T) {
	run, _, _ := fixture()
	params := workload.Params{"path": "veth"}
	samples := []store.Sample{
		rttSample("host", "host", 0, params, hist("us", repeat(10, 1000)...)),
		rttSample("host", "host", 1, params, hist("us", append(repeat(10, 960), repeat(1000, 40)...)...)),
		// A second guest of the container group, both repetitions: pooled too.
		rttSample("ctr-1", "container", 0, params, hist("us", repeat(20, 500)...)),
		rttSample("ctr-2", "container", 0, params, hist("us", repeat(30, 500)...)),
		rttSample("ctr-1", "container", 1, params, hist("us", repeat(20, 500)...)),
		rttSample("ctr-2", "container", 1, params, hist("us", repeat(30, 500)...)),
		// A scalar of the same run has no histogram and no latency row.
		{RunID: 7, Guest: "host", Group: "host", WorkloadID: "cpu", Metric: "events_per_sec", Value: 1, At: t0},
	}
	c := Build(run, samples, nil)
	if len(c.Latency) != 2 {
		t.Fatalf("%d latency rows, want host and container: %+v", len(c.Latency), c.Latency)
	}
	host, ctr := c.Latency[0], c.Latency[1]
	if host.Group != "host" || ctr.Group != "container" || host.Label() != "host" {
		t.Fatalf("rows %q (%q), %q: want the baseline first, labelled by group alone", host.Group, host.Label(), ctr.Group)
	}
	if p99 := host.Hist.Quantile(0.99); math.Abs(p99-1000)/1000 > stats.HistogramRelError {
		t.Errorf("host p99 = %v, want 1000 from the merged distribution (averaged p99s would give ~505)", p99)
	}
	if p50 := host.Hist.Quantile(0.5); math.Abs(p50-10)/10 > stats.HistogramRelError || host.Count != 2000 || host.Executions != 2 {
		t.Errorf("host p50 %v count %d executions %d; want 10, 2000, 2", p50, host.Count, host.Executions)
	}
	if ctr.Executions != 4 || ctr.Count != 2000 || ctr.Hist.Min() != 20 || ctr.Hist.Max() != 30 || ctr.Hist.Mean() != 25 {
		t.Errorf("container: %d executions, %d observations, min %v max %v mean %v; want both guests' both repetitions merged",
			ctr.Executions, ctr.Count, ctr.Hist.Min(), ctr.Hist.Max(), ctr.Hist.Mean())
	}
	var table bytes.Buffer
	if err := WriteTable(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "latency: percentiles") || !strings.Contains(table.String(), "p99.9") {
		t.Errorf("the table has no latency section:\n%s", table.String())
	}
}

func TestLatencyRowsPerParamsAndUnitMismatch(t *testing.T) {
	run, samples, _ := fullFixture()
	c := Build(run, samples, nil)
	var got []string
	for _, r := range c.Latency {
		got = append(got, r.Label())
	}
	// threads=1 is common to all rows, so only the path tells them apart.
	want := "host · path=veth|container · path=veth|host · path=xdp|container · path=xdp"
	if strings.Join(got, "|") != want {
		t.Fatalf("rows %q, want %q", strings.Join(got, "|"), want)
	}
	for _, r := range c.Latency {
		if r.Executions != 3 || r.Count != 9000 {
			t.Errorf("%s: %d executions, %d observations; want 3 and 9000", r.Label(), r.Executions, r.Count)
		}
	}
	// The container is 15% slower at the median on each path.
	if ratio := c.Latency[1].Hist.Quantile(0.5) / c.Latency[0].Hist.Quantile(0.5); math.Abs(ratio-1.15) > 0.05 {
		t.Errorf("container/host median = %v, want about 1.15", ratio)
	}

	samples = append(samples, rttSample("host", "host", 3, workload.Params{"path": "veth", "threads": "1"}, hist("ms", 1, 2)))
	c = Build(run, samples, nil)
	if r := c.Latency[0]; r.Skipped != 1 || r.Executions != 3 || r.Unit != "us" {
		t.Errorf("a histogram in ms among µs ones must be skipped and counted: %+v", r)
	}
	if note := latencyNote(c.Latency); !strings.Contains(note, "1 latency histogram") {
		t.Errorf("note = %q", note)
	}
}

func TestLatencyJSON(t *testing.T) {
	run, samples, failures := fullFixture()
	samples = append(samples, rttSample("host", "host", 0, workload.Params{"path": "empty"}, stats.NewHistogram("us")))
	var buf bytes.Buffer
	if err := WriteJSON(&buf, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Latency []map[string]any `json:"latency"`
		Samples []jsonSample     `json:"samples"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Latency) != 5 {
		t.Fatalf("%d latency rows, want 5", len(back.Latency))
	}
	first := back.Latency[0]
	for _, k := range []string{"workload_id", "metric", "unit", "group", "params", "executions", "count", "p50", "p90", "p99", "p99_9", "min", "mean", "max", "stddev"} {
		if _, ok := first[k]; !ok {
			t.Errorf("latency row lacks %q: %v", k, first)
		}
	}
	if p := first["p99_9"].(float64); !(p > first["p99"].(float64)) {
		t.Errorf("p99.9 %v not above p99 %v", p, first["p99"])
	}
	if empty := back.Latency[4]; empty["p50"] != nil || empty["count"].(float64) != 0 {
		t.Errorf("an empty histogram must give null figures: %v", empty)
	}
	var withHist int
	for i, s := range back.Samples {
		if s.Histogram != nil {
			withHist++
			if s.Histogram.Count() != samples[i].Hist.Count() {
				t.Errorf("sample %d: histogram of %d observations came back with %d", i, samples[i].Hist.Count(), s.Histogram.Count())
			}
		}
	}
	if withHist != 13 {
		t.Errorf("%d samples carry a histogram in the JSON, want 13", withHist)
	}
}

func TestCDFChart(t *testing.T) {
	rows := []LatencyRow{
		{WorkloadID: "ping", Metric: "rtt", Unit: "us", Hist: hist("us", 12, 15, 40, 90), label: "host"},
		{WorkloadID: "ping", Metric: "rtt", Unit: "ms", Hist: hist("ms", 0.02, 0.05, 1.5), label: "container"},
	}
	ch, ok := buildCDFChart(rows)
	if !ok {
		t.Fatal("no chart")
	}
	var ticks []string
	for _, tk := range ch.XTicks {
		ticks = append(ticks, tk.Label)
	}
	// 12 µs to 1.5 ms, the ms row converted: from 10 µs to 2 ms.
	if strings.Join(ticks, ",") != "10 µs,20 µs,50 µs,100 µs,200 µs,500 µs,1 ms,2 ms" || ch.AxisLabel != "latency (µs, log scale)" {
		t.Fatalf("ticks %v, axis %q", ticks, ch.AxisLabel)
	}
	if len(ch.Lines) != 2 || ch.Lines[0].Color == ch.Lines[1].Color || ch.Lines[1].Label != "container" {
		t.Fatalf("lines = %+v", ch.Lines)
	}
	for _, l := range ch.Lines {
		var lastX, lastY float64 = -1, math.Inf(1)
		pts := strings.Fields(l.Points)
		for i, p := range pts {
			xy := strings.Split(p, ",")
			x, _ := strconv.ParseFloat(xy[0], 64)
			y, _ := strconv.ParseFloat(xy[1], 64)
			if x < lastX || y > lastY || x < ch.Left || x > ch.Right {
				t.Fatalf("%s: point %d (%v) goes backwards or leaves the plot: %s", l.Label, i, p, l.Points)
			}
			lastX, lastY = x, y
		}
		if first := strings.Split(pts[0], ","); first[1] != strconv.FormatFloat(ch.Bottom, 'f', 1, 64) || lastY != ch.Top {
			t.Errorf("%s: the curve must run from 0 to 1: %s", l.Label, l.Points)
		}
	}
	// The 1.5 ms observation of the container sits at 1.5 ms on the µs axis.
	want := ch.Left + (math.Log10(1500)-1)/(math.Log10(2000)-1)*cdfPlotWidth
	if !strings.Contains(ch.Lines[1].Points, strconv.FormatFloat(want, 'f', 1, 64)+","+strconv.FormatFloat(ch.Top, 'f', 1, 64)) {
		t.Errorf("container's last point not at x=%.1f: %s", want, ch.Lines[1].Points)
	}
	if _, ok := buildCDFChart([]LatencyRow{{Unit: "us", Hist: hist("us", 0, 0)}}); ok {
		t.Error("only zeros cannot be drawn on a log axis, yet a chart was built")
	}
}

func TestTimeLabelAndRounding(t *testing.T) {
	for v, want := range map[float64]string{0.1: "100 ns", 1: "1 µs", 200: "200 µs", 1000: "1 ms", 5e5: "500 ms", 1e6: "1 s", 2e7: "20 s"} {
		if got := timeLabel(v, "µs", true); got != want {
			t.Errorf("timeLabel(%v) = %q, want %q", v, got, want)
		}
	}
	if got := timeLabel(100, "ops", false); got != "100 ops" {
		t.Errorf("non-time unit: %q", got)
	}
	for _, tc := range []struct{ v, below, above float64 }{
		{9.49, 5, 10}, {10, 10, 10}, {12, 10, 20}, {340, 200, 500}, {0.03, 0.02, 0.05}, {664.5, 500, 1000},
	} {
		if b, a := roundBelow(tc.v), roundAbove(tc.v); math.Abs(b-tc.below) > 1e-12 || math.Abs(a-tc.above) > 1e-12 {
			t.Errorf("round(%v) = %v, %v; want %v, %v", tc.v, b, a, tc.below, tc.above)
		}
	}
}

// The studies print one latency table per direction: a run that measured
// both gets a titled block each, in the order it measured them, and the
// terminal shows both titles.
func TestLatencyOneTablePerDirection(t *testing.T) {
	run, _, _ := fullFixture()
	toPeer := workload.Params{"path": "veth", workload.ParamClient: workload.ClientGuest}
	fromPeer := workload.Params{"path": "veth", workload.ParamClient: workload.ClientPeer}
	samples := []store.Sample{
		rttSample("host", "host", 0, toPeer, hist("us", repeat(10, 100)...)),
		rttSample("host", "host", 0, fromPeer, hist("us", repeat(30, 100)...)),
		rttSample("container", "container", 0, fromPeer, hist("us", repeat(40, 100)...)),
	}
	c := Build(run, samples, nil)
	blocks := latencyBlocks(c.Latency)
	if len(blocks) != 2 || !strings.HasPrefix(blocks[0].Title, "guest → peer") || !strings.HasPrefix(blocks[1].Title, "peer → guest") {
		t.Fatalf("blocks %+v", blocks)
	}
	if len(blocks[0].Rows) != 1 || len(blocks[1].Rows) != 2 || blocks[1].Rows[0].Hist.Quantile(0.5) < 29 {
		t.Errorf("rows per block: %d and %d, peer-side median %v", len(blocks[0].Rows), len(blocks[1].Rows), blocks[1].Rows[0].Hist.Quantile(0.5))
	}
	var b strings.Builder
	writeLatency(&b, c.Latency)
	if !strings.Contains(b.String(), "guest → peer") || !strings.Contains(b.String(), "peer → guest") {
		t.Errorf("terminal table lacks a direction:\n%s", b.String())
	}
	if one := latencyBlocks(c.Latency[:1]); len(one) != 1 || one[0].Title != "" {
		t.Errorf("a single direction must stay one untitled table: %+v", one)
	}
}
