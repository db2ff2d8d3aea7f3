package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// footprintRun is a consolidation-like run: two workloads measured three
// times, beside what a fleet section adds, each once: launch and density
// rows, and figures over the group's guests (their overlap, a total).
func footprintRun() (store.Run, []store.Sample) {
	run := store.Run{ID: 3, ScenarioName: "consolidation", Baseline: "host", Status: store.StatusComplete}
	var samples []store.Sample
	add := func(group, adapter, metric string, better workload.Better, values ...float64) {
		for rep, v := range values {
			samples = append(samples, store.Sample{RunID: run.ID, Guest: group, Group: group, Kind: group, WorkloadID: adapter,
				Workload: adapter, Repetition: rep, Metric: metric, Unit: "u", Value: v, Better: better})
		}
	}
	add("host", "stream", "copy_mbps", workload.HigherIsBetter, 100, 102, 101)
	add("lxc", "stream", "copy_mbps", workload.HigherIsBetter, 95, 99, 96)
	add("host", "stream", "triad_mbps", workload.HigherIsBetter, 200, 198, 202)
	add("lxc", "stream", "triad_mbps", workload.HigherIsBetter, 210, 204, 212)
	add("host", "ping", "rtt_us", workload.LowerIsBetter, 10, 11, 10.5)
	add("lxc", "ping", "rtt_us", workload.LowerIsBetter, 12, 12.5, 12.2)
	add("host", "stream", workload.MetricOverlap, workload.HigherIsBetter, 99)
	add("lxc", "stream", workload.MetricOverlap, workload.HigherIsBetter, 40)
	add("host", "stream", workload.TotalPrefix+"copy_mbps", workload.HigherIsBetter, 1000)
	add("lxc", "stream", workload.TotalPrefix+"copy_mbps", workload.HigherIsBetter, 300)
	add("host", workload.LaunchWorkload, "launch.ready_s", workload.LowerIsBetter, 0.1)
	add("lxc", workload.LaunchWorkload, "launch.ready_s", workload.LowerIsBetter, 0.142)
	add("host", workload.DensityWorkload, "density.guest_private_bytes", workload.LowerIsBetter, 1e6)
	add("lxc", workload.DensityWorkload, "density.guest_private_bytes", workload.LowerIsBetter, 2.39e6)
	return run, samples
}

func meanOfTest(v ...float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// The overhead index is what the technology costs the workloads: the
// launch, density and fleet rows, one value each, neither move it nor take
// its interval away; the footprint gets its own index beside it.
func TestOverheadIndexIsTheWorkloadsPerformanceOnly(t *testing.T) {
	run, samples := footprintRun()
	c := Build(run, samples, nil)

	stream := math.Sqrt(meanOfTest(95, 99, 96) / meanOfTest(100, 102, 101) * meanOfTest(210, 204, 212) / meanOfTest(200, 198, 202))
	ping := meanOfTest(10, 11, 10.5) / meanOfTest(12, 12.5, 12.2)
	want := math.Sqrt(stream * ping)
	got := c.Index[1]
	if math.Abs(got.Value-want) > 1e-12 {
		t.Errorf("overhead index = %v, want %v, the geometric mean over the two workloads only", got.Value, want)
	}
	terms := []stats.IndexTerm{
		{Workload: "stream", Guest: []float64{95, 99, 96}, Base: []float64{100, 102, 101}},
		{Workload: "stream", Guest: []float64{210, 204, 212}, Base: []float64{200, 198, 202}},
		{Workload: "ping", Guest: []float64{12, 12.5, 12.2}, Base: []float64{10, 11, 10.5}, LowerIsBetter: true},
	}
	if interval := stats.OverheadIndex(terms, stats.DefaultConfidence); !finite(got.Low) || !finite(got.High) ||
		math.Abs(got.Low-interval.Low) > 1e-12 || math.Abs(got.High-interval.High) > 1e-12 {
		t.Errorf("overhead index interval = [%v, %v], want the repetitions' [%v, %v]", got.Low, got.High, interval.Low, interval.High)
	}

	if len(c.Footprint) != 2 {
		t.Fatalf("footprint index = %v, want one per column", c.Footprint)
	}
	fp, wantFP := c.Footprint[1], math.Sqrt(0.1/0.142*1e6/2.39e6)
	if math.Abs(fp.Value-wantFP) > 1e-12 || !math.IsNaN(fp.Low) || !math.IsNaN(fp.High) {
		t.Errorf("footprint index = %+v, want %v with no interval (one value each)", fp, wantFP)
	}
	for _, r := range c.Rows {
		wantRole := workload.RolePerformance
		switch {
		case r.WorkloadID == workload.LaunchWorkload || r.WorkloadID == workload.DensityWorkload:
			wantRole = workload.RoleFootprint
		case r.Metric == workload.MetricOverlap || strings.HasPrefix(r.Metric, workload.TotalPrefix):
			wantRole = workload.RoleFleet
		}
		if r.Role != wantRole {
			t.Errorf("%s %s: role %q, want %q", r.Entry(), r.Metric, r.Role, wantRole)
		}
	}
}

// A run without a fleet section has no footprint index to show.
func TestNoFootprintIndexWithoutFleetRows(t *testing.T) {
	run, samples, failures := fixture()
	c := Build(run, samples, failures)
	if c.Footprint != nil {
		t.Errorf("footprint index = %v, want none", c.Footprint)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "footprint") {
		t.Errorf("table speaks of a footprint it does not have:\n%s", out.String())
	}
}

// Every output shows the footprint beside the overhead index, and says
// plainly when a figure measured once has no interval.
func TestFootprintIndexInEveryOutput(t *testing.T) {
	run, samples := footprintRun()
	c := Build(run, samples, nil)

	var table bytes.Buffer
	if err := WriteTable(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(table.String(), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "footprint index ↑") })
	if at < 1 || !strings.HasPrefix(lines[at-1], "overhead index ↑") || !strings.Contains(lines[at], "0.54 [no interval]") {
		t.Errorf("table lacks the footprint index, with no interval, under the overhead index:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "[no interval]: a figure measured once") {
		t.Errorf("table legend does not say what [no interval] means:\n%s", table.String())
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, c, samples); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Index     []jsonEstimate `json:"overhead_index"`
		Footprint []jsonEstimate `json:"footprint_index"`
		Rows      []struct {
			Metric string        `json:"metric"`
			Role   workload.Role `json:"role"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Footprint) != 2 || doc.Footprint[1].Value == nil || doc.Footprint[1].Low != nil || doc.Index[1].Low == nil {
		t.Errorf("JSON indexes = %+v / footprint %+v, want an overhead interval and a footprint without one", doc.Index, doc.Footprint)
	}
	if i := slices.IndexFunc(doc.Rows, func(r struct {
		Metric string        `json:"metric"`
		Role   workload.Role `json:"role"`
	}) bool {
		return r.Metric == "launch.ready_s"
	}); i < 0 || doc.Rows[i].Role != workload.RoleFootprint {
		t.Errorf("JSON rows = %+v, want launch.ready_s as footprint", doc.Rows)
	}

	var raw bytes.Buffer
	if err := WriteCSV(&raw, samples); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&raw).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	metric, role := slices.Index(recs[0], "metric"), slices.Index(recs[0], "role")
	roles := map[string]string{}
	for _, rec := range recs[1:] {
		roles[rec[metric]] = rec[role]
	}
	if roles["copy_mbps"] != "performance" || roles["density.guest_private_bytes"] != "footprint" || roles[workload.MetricOverlap] != "fleet" {
		t.Errorf("CSV roles = %v", roles)
	}

	var page bytes.Buffer
	if err := WriteHTML(&page, c, samples); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<h2>Footprint index</h2>") || !strings.Contains(page.String(), "0.54 [no interval]") {
		t.Error("HTML lacks the footprint index")
	}
}

// Across machines, each index is over its own rows every machine measured.
func TestAcrossShowsBothIndexes(t *testing.T) {
	run, samples := footprintRun()
	lab1, lab2 := run, run
	lab1.Host, lab2.ID, lab2.Host = hostinfo.Fingerprint{Hostname: "lab1"}, 4, hostinfo.Fingerprint{Hostname: "lab2"}
	a, err := BuildAcross([]Comparison{Build(lab1, samples, nil), Build(lab2, samples, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteAcrossTable(&out, a, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"overhead index ↑ over the 3 of 3 performance metrics every machine measured",
		"footprint index ↑ over the 2 of 2 footprint metrics every machine measured"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("across table lacks %q:\n%s", want, out.String())
		}
	}
	var js bytes.Buffer
	if err := WriteAcrossJSON(&js, a); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Machines []struct {
			Index           []jsonEstimate `json:"overhead_index_shared"`
			SharedFootprint []jsonEstimate `json:"footprint_index_shared"`
		} `json:"machines"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if m := doc.Machines[1]; len(m.SharedFootprint) != 2 || m.SharedFootprint[1].Value == nil || m.Index[1].Low == nil {
		t.Errorf("across JSON = %+v, want each machine's shared overhead interval and footprint index", doc.Machines)
	}
}

// Runs of footprint rows alone still have an overhead index to print,
// with nothing comparable in it.
func TestAcrossWithFootprintOnly(t *testing.T) {
	run, samples := footprintRun()
	samples = slices.DeleteFunc(samples, func(s store.Sample) bool {
		return workload.RoleOf(s.Workload, s.Metric) != workload.RoleFootprint
	})
	other := run
	other.ID = 4
	a, err := BuildAcross([]Comparison{Build(run, samples, nil), Build(other, samples, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var out, page bytes.Buffer
	if err := WriteAcrossTable(&out, a, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "over the 0 of 0 performance metrics") || !strings.Contains(out.String(), "0.54 [no interval]") {
		t.Errorf("across table:\n%s", out.String())
	}
	if err := WriteAcrossHTML(&page, a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<h2>Footprint index</h2>") {
		t.Error("across HTML lacks the footprint index")
	}
}
