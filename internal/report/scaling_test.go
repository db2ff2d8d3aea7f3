package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// throughputEntry is an iperf3 entry of the fixture: its scenario params
// and each group's throughput per repetition, in Gbit/s.
type throughputEntry struct {
	id     string
	params workload.Params
	gbps   map[string][]float64
	cpuNS  int64
}

// throughputEntries are shaped like netpath-throughput: 64 B and 16 KiB
// writes on one stream, 64 B on four. Left-out parameters take iperf3's
// defaults (streams 1, msg_size 16384), so tcp-64 and tcp-16k differ in
// msg_size alone and tcp-64 and tcp-64-x4 in streams alone; tcp-16k and
// tcp-64-x4 differ in both and make no curve.
var throughputEntries = []throughputEntry{
	{"tcp-64", workload.Params{"proto": "tcp", "msg_size": "64"},
		map[string][]float64{"host": {2.10, 2.14, 2.12}, "container": {1.71, 1.75, 1.73}}, 2.95e9},
	{"tcp-16k", workload.Params{"proto": "tcp"},
		map[string][]float64{"host": {9.52, 9.60, 9.56}, "container": {8.20, 8.31, 8.26}}, 1.2e9},
	{"tcp-64-x4", workload.Params{"proto": "tcp", "msg_size": "64", "streams": "4"},
		map[string][]float64{"host": {3.52, 3.60, 3.55}, "container": {2.80, 2.86, 2.83}}, 5.9e9},
}

// addThroughputEntries appends the throughput entries' samples: per
// execution the throughput (the headline) and the retransmits, so that
// every execution gives two samples with the same CPU time. The guests'
// samples carry their data path as the runner stores it, a parameter that
// differs by group, not by entry.
func addThroughputEntries(samples []store.Sample) []store.Sample {
	paths := map[string]string{"host": "veth", "container": "xdp"}
	for _, e := range throughputEntries {
		for _, group := range []string{"host", "container"} {
			for rep, v := range e.gbps[group] {
				params := workload.Params{"path": paths[group]}
				for k, pv := range e.params {
					params[k] = pv
				}
				base := store.Sample{RunID: 7, Guest: group, Group: group, Kind: map[string]string{"host": "host", "container": "container"}[group],
					WorkloadID: e.id, Workload: "net-throughput", Params: params, Repetition: rep, At: t0, WallNS: 3.05e9, CPUNS: e.cpuNS}
				if group == "container" {
					base.Runtime = "runc"
				}
				tp, rx := base, base
				tp.Metric, tp.Unit, tp.Value, tp.Better = "net.throughput_bps", "bit/s", v*1e9, workload.HigherIsBetter
				rx.Metric, rx.Unit, rx.Value, rx.Better = "net.retransmits", "segments", float64(rep), workload.LowerIsBetter
				samples = append(samples, tp, rx)
			}
		}
	}
	return samples
}

func TestScalingCurvesOfTheFixture(t *testing.T) {
	c := Build(fullFixture())
	if len(c.Scaling) != 2 {
		t.Fatalf("%d curves, want 2 (msg_size at 1 stream, streams at 64 B): %+v", len(c.Scaling), c.Scaling)
	}
	msg, streams := c.Scaling[0], c.Scaling[1]
	if msg.Param != "msg_size" || !msg.LogX || msg.Metric != "net.throughput_bps" || msg.Fixed["streams"] != "1" || msg.Fixed["path"] != "" {
		t.Errorf("msg_size curve = %+v", msg)
	}
	if streams.Param != "streams" || streams.LogX || streams.Fixed["msg_size"] != "64" {
		t.Errorf("streams curve = %+v", streams)
	}
	if len(msg.Series) != 2 || msg.Series[0].Label != "host" || msg.Series[1].Label != "container (runc)" {
		t.Fatalf("series = %+v", msg.Series)
	}
	host := msg.Series[0].Points
	if len(host) != 2 || host[0].X != 64 || host[1].X != 16384 || host[0].Source != "tcp-64" || host[0].N != 3 {
		t.Fatalf("host points = %+v", host)
	}
	if math.Abs(host[1].Y-9.56e9) > 1 || !(host[1].Low < host[1].Y && host[1].Y < host[1].High) {
		t.Errorf("host at 16384: %+v, want the mean 9.56e9 inside its interval", host[1])
	}
}

func TestScalingDetection(t *testing.T) {
	run, _, _ := fixture()
	mk := func(id, wl string, params workload.Params) []store.Sample {
		var out []store.Sample
		for rep, v := range []float64{100, 110} {
			out = append(out, store.Sample{Guest: "host", Group: "host", Kind: "host", WorkloadID: id, Workload: wl, Params: params,
				Repetition: rep, Metric: "iops", Unit: "IOPS", Value: v, Better: workload.HigherIsBetter, At: t0})
		}
		return out
	}
	type entry struct {
		id     string
		params workload.Params
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string // param of each curve, x values
	}{
		{"one numeric param differs", []entry{{"qd1", workload.Params{"rw": "randread", "iodepth": "1"}},
			{"qd16", workload.Params{"rw": "randread", "iodepth": "16"}}, {"qd4", workload.Params{"rw": "randread", "iodepth": "4"}}},
			"iodepth:1,4,16:log"},
		{"two params differ", []entry{{"a", workload.Params{"rw": "randread", "iodepth": "1", "bs": "4096"}},
			{"b", workload.Params{"rw": "randread", "iodepth": "16", "bs": "65536"}}}, ""},
		{"non-numeric param differs", []entry{{"a", workload.Params{"rw": "randread"}}, {"b", workload.Params{"rw": "randwrite"}}}, ""},
		{"same x twice", []entry{{"a", workload.Params{"iodepth": "4"}}, {"b", workload.Params{"iodepth": "4.0"}}}, ""},
		{"a single entry", []entry{{"a", workload.Params{"iodepth": "4"}}}, ""},
		{"narrow range is linear", []entry{{"a", workload.Params{"numjobs": "2"}}, {"b", workload.Params{"numjobs": "8"}}}, "numjobs:2,8:linear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var samples []store.Sample
			for _, e := range tc.entries {
				samples = append(samples, mk(e.id, "custom", e.params)...)
			}
			var got []string
			for _, sc := range Build(run, samples, nil).Scaling {
				var xs []string
				for _, p := range sc.Series[0].Points {
					xs = append(xs, strconv.FormatFloat(p.X, 'g', -1, 64))
				}
				scale := "linear"
				if sc.LogX {
					scale = "log"
				}
				got = append(got, sc.Param+":"+strings.Join(xs, ",")+":"+scale)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("curves %q, want %q", got, tc.want)
			}
		})
	}
}

// TestScalingNeedsOneTool: entries of different workloads, or whose
// headline metrics differ, never share a curve.
func TestScalingNeedsOneTool(t *testing.T) {
	run, _, _ := fixture()
	s := func(id, wl, metric, depth string) store.Sample {
		return store.Sample{Guest: "host", Group: "host", WorkloadID: id, Workload: wl, Params: workload.Params{"iodepth": depth},
			Metric: metric, Unit: "IOPS", Value: 1, At: t0}
	}
	for name, samples := range map[string][]store.Sample{
		"two tools":     {s("a", "fio", "read_iops", "1"), s("b", "other", "read_iops", "16")},
		"two headlines": {s("a", "fio", "read_iops", "1"), s("b", "fio", "write_iops", "16")},
	} {
		if sc := Build(run, samples, nil).Scaling; len(sc) != 0 {
			t.Errorf("%s: %+v", name, sc)
		}
	}
}

func TestLinePlotLayout(t *testing.T) {
	p := linePlot{Title: "t", XLabel: "msg_size", YLabel: "tp", YUnit: "bit/s", LogX: true, Series: []Series{
		{Label: "host", Points: []Point{{X: 64, Y: 2e9, Low: 1.9e9, High: 2.1e9, N: 3}, {X: 16384, Y: 9.6e9, Low: 9.6e9, High: 9.6e9, N: 1}}},
		{Label: "ctr", Points: []Point{{X: 1024, Y: 5e9, Low: 4e9, High: 6e9}}},
	}}
	ch, ok := buildLinePlot(p)
	if !ok {
		t.Fatal("no chart")
	}
	if len(ch.Lines) != 2 || ch.Lines[1].Points != "" || len(ch.Lines[1].Marks) != 1 {
		t.Fatalf("a single point is a mark without a line: %+v", ch.Lines)
	}
	host := ch.Lines[0].Marks
	// On a log axis 1024 sits between 64 and 16384 at (10-6)/(14-6) of the
	// way, as log2 says.
	// The two series are dodged apart by seriesDodge pixels.
	mid := ch.Lines[1].Marks[0].X - seriesDodge
	if want := host[0].X + (host[1].X-host[0].X)*4/8; math.Abs(mid-want) > 0.01 {
		t.Errorf("1024 at x=%.2f, want %.2f", mid, want)
	}
	if host[0].X <= ch.Left || host[1].X >= ch.Right {
		t.Errorf("end points on the frame: %+v", host)
	}
	if !host[0].Bar || host[1].Bar || !(host[0].HiY < host[0].Y && host[0].Y < host[0].LoY) {
		t.Errorf("error bars: %+v", host)
	}
	if ch.YLabel != "tp (Gbit/s)" || ch.XLabel != "msg_size (log scale)" || ch.YTicks[0].Label != "0" {
		t.Errorf("labels %q %q, first y tick %q", ch.YLabel, ch.XLabel, ch.YTicks[0].Label)
	}
	var xl []string
	for _, tk := range ch.XTicks {
		xl = append(xl, tk.Label)
	}
	if strings.Join(xl, ",") != "64,1024,16384" {
		t.Errorf("x ticks %v, want the measured values", xl)
	}
	if top := ch.YTicks[len(ch.YTicks)-1]; top.Y > host[1].Y {
		t.Errorf("the axis (top tick %s) does not reach 9.6", top.Label)
	}
	if !strings.Contains(host[0].Title, "2.00 Gbit/s [1.90 Gbit/s, 2.10 Gbit/s] (n=3)") {
		t.Errorf("title %q", host[0].Title)
	}
	if _, ok := buildLinePlot(linePlot{LogX: true, Series: []Series{{Points: []Point{{X: 0, Y: 1}}}}}); ok {
		t.Error("x = 0 has no place on a log axis, yet a chart was built")
	}
	// A fleet-size sweep: the same function, x a count.
	if ch, ok := buildLinePlot(linePlot{XLabel: "guests", YUnit: "events/s", Series: []Series{{Label: "ctr",
		Points: []Point{{X: 1, Y: 4000}, {X: 2, Y: 3900}, {X: 4, Y: 3500}}}}}); !ok || len(ch.XTicks) != 3 || ch.Lines[0].Points == "" {
		t.Errorf("sweep chart: %+v", ch)
	}
}

func TestScalingAndCostInJSONAndHTML(t *testing.T) {
	run, samples, failures := fullFixture()
	c := Build(run, samples, failures)
	var js, page bytes.Buffer
	if err := WriteJSON(&js, c, samples); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Scaling []ScalingCurve   `json:"scaling"`
		Cost    []map[string]any `json:"cost"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Scaling) != 2 || len(back.Scaling[0].Series[0].Points) != 2 {
		t.Fatalf("scaling = %+v", back.Scaling)
	}
	if len(back.Cost) != len(c.Cost) || len(back.Cost) == 0 {
		t.Fatalf("%d cost rows in JSON, %d built", len(back.Cost), len(c.Cost))
	}
	for _, k := range []string{"workload_id", "workload", "group", "params", "executions", "cpu_seconds", "wall_seconds", "cores", "per_unit"} {
		if _, ok := back.Cost[0][k]; !ok {
			t.Errorf("cost row lacks %q: %v", k, back.Cost[0])
		}
	}
	if err := WriteHTML(&page, c, samples); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Scaling</h2>", `<svg class="scaling"`, "msg_size (log scale)", `<path class="errbar"`,
		"CPU cost of the measuring tool", "CPU s/GB", "softirq on another CPU"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The JSON download is the very document WriteJSON writes.
	if got := downloaded(t, page.String(), "application/json"); !bytes.Equal(got, js.Bytes()) {
		t.Error("the page's JSON download differs from WriteJSON's output")
	}
}
