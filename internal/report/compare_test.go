package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

func abSamples(runID int64, values map[string][]float64) []store.Sample {
	var out []store.Sample
	for _, metric := range []string{"events_per_sec", "read_clat_p99"} {
		better := workload.HigherIsBetter
		if metric == "read_clat_p99" {
			better = workload.LowerIsBetter
		}
		for i, v := range values[metric] {
			out = append(out, store.Sample{RunID: runID, Group: "container", WorkloadID: "w", Metric: metric, Unit: "u",
				Better: better, Value: v, Repetition: i, Params: workload.Params{"threads": "1"}})
		}
	}
	return out
}

func TestCompareDetectsRealChangesOnly(t *testing.T) {
	a := abSamples(1, map[string][]float64{
		"events_per_sec": {100, 101, 99, 100.5, 99.5},
		"read_clat_p99":  {50, 51, 49, 50, 50},
	})
	b := abSamples(2, map[string][]float64{
		"events_per_sec": {90, 91, 89, 90.5, 89.5}, // 10% slower, fully separated
		"read_clat_p99":  {50.5, 49.5, 51, 50, 49}, // the same
	})
	c := CompareRuns(store.Run{ID: 1}, a, store.Run{ID: 2}, b, DefaultCompareOptions)
	if len(c.Rows) != 2 {
		t.Fatalf("rows = %+v", c.Rows)
	}
	if r := c.Rows[0]; r.Verdict != VerdictWorse || r.P >= 0.01 || r.Change.Ratio > 0.91 {
		t.Errorf("a 10%% slowdown must be worse: %+v", r)
	}
	if r := c.Rows[1]; r.Verdict != VerdictSame {
		t.Errorf("unchanged latency: %+v", r)
	}
	// Lower latency in B is better, not worse.
	faster := abSamples(3, map[string][]float64{"read_clat_p99": {40, 40.5, 39.5, 40, 40.2}})
	c = CompareRuns(store.Run{ID: 1}, a, store.Run{ID: 3}, faster, DefaultCompareOptions)
	for _, r := range c.Rows {
		if r.Metric == "read_clat_p99" && r.Verdict != VerdictBetter {
			t.Errorf("lower latency: %+v", r)
		}
		if r.Metric == "events_per_sec" && r.Verdict != VerdictOnlyA {
			t.Errorf("metric missing from B: %+v", r)
		}
	}
}

func TestCompareBelowNoiseFloorOrFewRepsIsNoDifference(t *testing.T) {
	a := abSamples(1, map[string][]float64{"events_per_sec": {100, 100.1, 100.2, 100.1, 100}})
	b := abSamples(2, map[string][]float64{"events_per_sec": {102, 102.1, 102.2, 102.1, 102}}) // 2%: significant, too small
	if r := CompareRuns(store.Run{}, a, store.Run{}, b, DefaultCompareOptions).Rows[0]; r.Verdict != VerdictSame || r.P >= 0.01 {
		t.Errorf("a significant 2%% change is under the 5%% floor: %+v", r)
	}
	few := abSamples(1, map[string][]float64{"events_per_sec": {100, 101, 99}})
	fewB := abSamples(2, map[string][]float64{"events_per_sec": {50, 51, 49}})
	c := CompareRuns(store.Run{}, few, store.Run{}, fewB, DefaultCompareOptions)
	if c.Rows[0].Verdict != VerdictSame {
		t.Errorf("3 reps cannot reach p < 0.01: %+v", c.Rows[0])
	}
	var buf bytes.Buffer
	WriteABTable(&buf, c, TableOptions{})
	if !strings.Contains(buf.String(), "use at least 5") {
		t.Errorf("the table must say why nothing can be significant:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteABJSON(&buf, c); err != nil {
		t.Fatal(err)
	}
	var back struct{ Rows []ABRow }
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Rows) != 1 {
		t.Fatalf("json: %v %+v", err, back)
	}
}
