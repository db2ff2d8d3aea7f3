package report

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// The report splits rows by the labels the scenario package stores.
func TestCaseParamsAreTheScenarioLabels(t *testing.T) {
	if want := []string{scenario.LabelFleetSize, scenario.LabelMode, scenario.LabelNoise}; !reflect.DeepEqual(caseParams, want) {
		t.Errorf("caseParams = %v, want %v", caseParams, want)
	}
}

func fleetSample(group, metric string, v float64, rep int, params workload.Params) store.Sample {
	return store.Sample{RunID: 1, Guest: group, Group: group, Kind: "container", WorkloadID: "cpu", Workload: "cpu",
		Params: params, Repetition: rep, Metric: metric, Unit: "events/s", Value: v, Better: workload.HigherIsBetter}
}

func TestInterferenceMatrixNormalisesToTheBaselineAlone(t *testing.T) {
	var samples []store.Sample
	for rep, jitter := range []float64{-1, 1} {
		for _, s := range []struct {
			group, mode string
			v           float64
		}{{"host", "alone", 1000}, {"c", "alone", 900}, {"host", "together", 600}, {"c", "together", 450}} {
			samples = append(samples, fleetSample(s.group, "events_per_sec", s.v+jitter, rep, workload.Params{"mode": s.mode}))
		}
	}
	c := Build(store.Run{ID: 1, Baseline: "host", Status: store.StatusComplete}, samples, nil)
	if len(c.Rows) != 2 || c.Rows[0].Case != "mode=alone" || c.Rows[1].Entry() != "cpu [mode=together]" {
		t.Fatalf("rows = %+v, want one per mode", c.Rows)
	}
	m := c.Interference
	if m == nil || len(m.Rows) != 1 {
		t.Fatalf("interference = %+v, want one row", m)
	}
	var labels []string
	for _, col := range m.Columns {
		labels = append(labels, col.Label)
	}
	if want := []string{"host alone", "c alone", "host together", "c together"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("columns = %v, want %v", labels, want)
	}
	var ratios []float64
	for _, cell := range m.Rows[0].Cells {
		ratios = append(ratios, math.Round(cell.Normalized.Ratio*100)/100)
	}
	if want := []float64{1, 0.9, 0.6, 0.45}; !reflect.DeepEqual(ratios, want) {
		t.Errorf("ratios = %v, want %v", ratios, want)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "interference:") || !strings.Contains(out.String(), "0.45 (450.0 events/s)") {
		t.Errorf("table lacks the matrix:\n%s", out.String())
	}
	out.Reset()
	if err := WriteHTML(&out, c, samples); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "<h2>Interference</h2>") {
		t.Error("HTML lacks the matrix")
	}
}

func TestNoInterferenceMatrixWithoutBothModes(t *testing.T) {
	samples := []store.Sample{fleetSample("host", "events_per_sec", 1, 0, nil), fleetSample("c", "events_per_sec", 1, 0, nil)}
	if m := Build(store.Run{ID: 1, Baseline: "host"}, samples, nil).Interference; m != nil {
		t.Errorf("interference = %+v, want none", m)
	}
}

func TestFleetSweepDrawsPerGuestAndTotalCurves(t *testing.T) {
	var samples []store.Sample
	for _, size := range []int{1, 2, 4} {
		p := workload.Params{"fleet_size": strconv.Itoa(size)}
		for rep := 0; rep < 2; rep++ {
			per := 1000 / float64(size)
			samples = append(samples, fleetSample("c", "events_per_sec", per+float64(rep), rep, p),
				fleetSample("c", "total.events_per_sec", per*float64(size)+float64(rep), rep, p))
		}
	}
	c := Build(store.Run{ID: 1, Baseline: "c"}, samples, nil)
	var metrics []string
	for _, curve := range c.Scaling {
		if curve.Param != "fleet_size" || len(curve.Series) != 1 || len(curve.Series[0].Points) != 3 {
			t.Errorf("curve %+v: want 3 points over fleet_size", curve)
		}
		metrics = append(metrics, curve.Metric)
	}
	if want := []string{"events_per_sec", "total.events_per_sec"}; !reflect.DeepEqual(metrics, want) {
		t.Errorf("curves of %v, want %v", metrics, want)
	}
}

// A workload that names several headlines (STREAM's four kernels) has a
// matrix row for each; others keep one, their first metric.
func TestInterferenceMatrixShowsEveryHeadline(t *testing.T) {
	var samples []store.Sample
	for rep := range 2 {
		for _, mode := range []string{"alone", "together"} {
			for _, g := range []string{"host", "c"} {
				for _, m := range []string{"copy_mbps", "scale_mbps", "add_mbps", "triad_mbps"} {
					s := fleetSample(g, m, 1000+float64(rep), rep, workload.Params{"mode": mode})
					s.WorkloadID, s.Workload, s.Unit = "stream", "stream", "MB/s"
					samples = append(samples, s)
				}
				samples = append(samples, fleetSample(g, "events_per_sec", 10, rep, workload.Params{"mode": mode}),
					fleetSample(g, "latency", 10, rep, workload.Params{"mode": mode}))
			}
		}
	}
	m := Build(store.Run{ID: 1, Baseline: "host"}, samples, nil).Interference
	var rows []string
	for _, r := range m.Rows {
		rows = append(rows, r.WorkloadID+" "+r.Metric)
	}
	if want := []string{"stream copy_mbps", "stream scale_mbps", "stream add_mbps", "stream triad_mbps", "cpu events_per_sec"}; !reflect.DeepEqual(rows, want) {
		t.Errorf("matrix rows = %v, want %v", rows, want)
	}
}

// The lxcbench built-in's matrix is the study's table: STREAM's four
// kernels, CacheBench's three modes and LAME's time (not its CPU time),
// in that order, in the study's four columns.
func TestInterferenceMatrixIsTheLXCBENCHTable(t *testing.T) {
	entries := []struct {
		workload string
		metrics  []string
	}{
		{"stream", []string{"copy_mbps", "scale_mbps", "add_mbps", "triad_mbps"}},
		{"cachebench", []string{"read_mbps", "write_mbps", "rmw_mbps"}},
		{"lame", []string{"encode_s", "encode_cpu_s"}},
	}
	var samples []store.Sample
	for rep := range 2 {
		for _, mode := range []string{"alone", "together"} {
			for _, g := range []string{"host", "lxc"} {
				for _, e := range entries {
					for _, m := range e.metrics {
						s := fleetSample(g, m, 100+float64(rep), rep, workload.Params{"mode": mode})
						s.WorkloadID, s.Workload = e.workload, e.workload
						samples = append(samples, s)
					}
				}
			}
		}
	}
	m := Build(store.Run{ID: 1, Baseline: "host"}, samples, nil).Interference
	var rows, columns []string
	for _, r := range m.Rows {
		rows = append(rows, r.WorkloadID+" "+r.Metric)
	}
	for _, c := range m.Columns {
		columns = append(columns, c.Label)
	}
	want := []string{"stream copy_mbps", "stream scale_mbps", "stream add_mbps", "stream triad_mbps",
		"cachebench read_mbps", "cachebench write_mbps", "cachebench rmw_mbps", "lame encode_s"}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("matrix rows = %v, want %v", rows, want)
	}
	if want := []string{"host alone", "lxc alone", "host together", "lxc together"}; !reflect.DeepEqual(columns, want) {
		t.Errorf("columns = %v, want %v", columns, want)
	}
}
