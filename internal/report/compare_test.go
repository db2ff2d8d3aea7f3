package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

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
		"read_clat_p99":  {50, 50.2, 49.8, 50, 50},
	})
	b := abSamples(2, map[string][]float64{
		"events_per_sec": {90, 91, 89, 90.5, 89.5},     // 10% slower, fully separated
		"read_clat_p99":  {50.1, 49.9, 50.2, 50, 49.8}, // the same
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

func TestCompareWithinTheFloorIsSame(t *testing.T) {
	a := abSamples(1, map[string][]float64{"events_per_sec": {100, 100.1, 100.2, 100.1, 100}})
	b := abSamples(2, map[string][]float64{"events_per_sec": {102, 102.1, 102.2, 102.1, 102}}) // 2%: real, within the floor
	if r := CompareRuns(store.Run{}, a, store.Run{}, b, DefaultCompareOptions).Rows[0]; r.Verdict != VerdictSame || r.P >= 0.01 {
		t.Errorf("a significant 2%% change whose interval lies within the 5%% floor: %+v", r)
	}
}

// The case: -7.4% [-12.8, -2.0] in 5 repetitions a side was
// called "no significant difference", exit 0. Its interval reaches beyond
// the floor, so it is not the same, and its p has not reached the look's
// level: undecided, with how many repetitions would likely decide it. A
// change whose point estimate is within the floor but whose interval is
// wide is not the same either.
func TestCompareUndecidedSaysWhatWouldDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float64
	}{
		{"beyond the floor", []float64{1000, 1040, 950, 1010, 990}, []float64{930, 990, 900, 960, 950}},
		{"wide around -3%", []float64{100, 115, 85}, []float64{97, 110, 84}},
	} {
		a := abSamples(1, map[string][]float64{"events_per_sec": tc.a})
		b := abSamples(2, map[string][]float64{"events_per_sec": tc.b})
		c := CompareRuns(store.Run{ID: 1}, a, store.Run{ID: 2}, b, DefaultCompareOptions)
		r := c.Rows[0]
		if r.Verdict != VerdictUndecided || r.NeedsRepetitions <= len(tc.b) || !c.Continue {
			t.Errorf("%s: %+v", tc.name, r)
			continue
		}
		note := fmt.Sprintf("1 metric is undecided after %d and %d repetitions: about %d repetitions a side would likely decide at the noise measured",
			len(tc.a), len(tc.b), r.NeedsRepetitions)
		var table, page, js bytes.Buffer
		if err := WriteABTable(&table, c, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := WriteABHTML(&page, c); err != nil {
			t.Fatal(err)
		}
		for what, out := range map[string]string{"table": table.String(), "html": page.String()} {
			if !strings.Contains(out, VerdictUndecided) || !strings.Contains(out, note) {
				t.Errorf("%s: %s must give the verdict and what would decide it (%q):\n%s", tc.name, what, note, out)
			}
		}
		if err := WriteABJSON(&js, c); err != nil {
			t.Fatal(err)
		}
		var back struct{ Rows []ABRow }
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != 1 {
			t.Fatalf("json: %v %+v", err, back)
		}
		if got := back.Rows[0]; got.Verdict != VerdictUndecided || got.NeedsRepetitions != r.NeedsRepetitions || got.CVA == 0 || got.Level == 0 {
			t.Errorf("%s: json row: %+v", tc.name, got)
		}
	}
}

// A group of 2 guests gives 2 values a repetition: what is counted and
// asked for is repetitions, each worth two values, so the same values
// from 2 guests need about half the repetitions they need from one.
func TestCompareUndecidedCountsRepetitionsNotValues(t *testing.T) {
	samples := func(run int64, guests int, values ...float64) []store.Sample {
		var out []store.Sample
		for i, v := range values {
			out = append(out, store.Sample{RunID: run, Guest: fmt.Sprintf("c%d", i%guests), Group: "container", WorkloadID: "w",
				Metric: "events_per_sec", Unit: "u", Better: workload.HigherIsBetter, Value: v, Repetition: i / guests})
		}
		return out
	}
	av := []float64{100, 112, 90, 104, 95, 108}
	bv := []float64{95, 106, 86, 99, 90, 101}
	needs := map[int]int{}
	for _, guests := range []int{1, 2} {
		c := CompareRuns(store.Run{ID: 1}, samples(1, guests, av...), store.Run{ID: 2}, samples(2, guests, bv...), DefaultCompareOptions)
		r := c.Rows[0]
		if r.Verdict != VerdictUndecided || r.RepetitionsA != 6/guests || r.A.N != 6 {
			t.Fatalf("%d guests: %+v", guests, r)
		}
		needs[guests] = r.NeedsRepetitions
	}
	if n1, n2 := needs[1], needs[2]; n2 < n1/2-1 || n2 > n1/2+1 {
		t.Errorf("repetitions needed: %d with one guest, %d with two; want about half", n1, n2)
	}
}

// abFixture is two runs of five repetitions: the container's cpu got 10%
// slower, the host's read latency 20% lower, memory did not move, and the
// vm's boot time was measured only in A. B ran on a newer kernel.
func abFixture() ABComparison {
	a, _, _ := fixture()
	b := a
	b.ID, b.Started = 8, a.Started.Add(time.Hour)
	b.Host.Kernel = "6.1.1"
	var as, bs []store.Sample
	add := func(to *[]store.Sample, run int64, group, wl, metric, unit string, better workload.Better, params workload.Params, values ...float64) {
		for rep, v := range values {
			*to = append(*to, store.Sample{RunID: run, Guest: group, Group: group, WorkloadID: wl, Params: params, Repetition: rep,
				Metric: metric, Unit: unit, Value: v, Better: better})
		}
	}
	one := workload.Params{"threads": "1"}
	add(&as, 7, "container", "cpu", "events_per_sec", "events/s", workload.HigherIsBetter, one, 4100, 4120, 4110, 4105, 4115)
	add(&bs, 8, "container", "cpu", "events_per_sec", "events/s", workload.HigherIsBetter, one, 3690, 3700, 3710, 3695, 3705)
	add(&as, 7, "host", "fio-randread", "read_clat_p99", "us", workload.LowerIsBetter, workload.Params{"bs": "4k"}, 100, 102, 101, 99, 100)
	add(&bs, 8, "host", "fio-randread", "read_clat_p99", "us", workload.LowerIsBetter, workload.Params{"bs": "4k"}, 80, 81, 79, 80, 80.5)
	add(&as, 7, "host", "memory", "read_bw", "MB/s", workload.HigherIsBetter, nil, 10000, 10100, 10050, 10020, 10080)
	add(&bs, 8, "host", "memory", "read_bw", "MB/s", workload.HigherIsBetter, nil, 10010, 10090, 10060, 10030, 10040)
	add(&as, 7, "vm", "boot", "boot_ms", "ms", workload.LowerIsBetter, nil, 900, 910, 905, 902, 908)
	return CompareRuns(a, as, b, bs, DefaultCompareOptions)
}

func TestABHTMLGoldenAndSelfContained(t *testing.T) {
	c := abFixture()
	var buf bytes.Buffer
	if err := WriteABHTML(&buf, c); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	golden(t, "compare.html.golden", buf.Bytes())
	for _, want := range []string{
		`<rect class="worse"`, `<rect class="better"`, `<rect class="same"`, `<rect class="band"`,
		"-10.0%", "kernel: 6.1.0 → 6.1.1", "only in A", "bs=4k",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
		t.Error("a non-finite number reached the page")
	}
	// assertSelfContained also wants the run report's CSV link; this page
	// has no raw data, so only the external references are checked.
	for _, bad := range externalRefs(page) {
		t.Errorf("the page depends on something outside it: %s", bad)
	}
	if got := strings.Count(page, `<rect class="`) - 1; got != 3 {
		t.Errorf("%d bars, want 3: the metric only in A has no change to plot", got)
	}
}

func TestABHTMLWithNothingInCommon(t *testing.T) {
	a := abSamples(1, map[string][]float64{"events_per_sec": {1, 2, 3}})
	b := abSamples(2, map[string][]float64{"read_clat_p99": {1, 2, 3}})
	var buf bytes.Buffer
	if err := WriteABHTML(&buf, CompareRuns(store.Run{ID: 1}, a, store.Run{ID: 2}, b, DefaultCompareOptions)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<svg") || !strings.Contains(buf.String(), "No metric was measured in both runs") {
		t.Errorf("two runs with nothing in common must say so instead of drawing an empty plot:\n%s", buf.String())
	}
	if err := WriteABHTML(failingWriter{}, abFixture()); !errors.Is(err, errDiskFull) {
		t.Errorf("err = %v, want the writer's error", err)
	}
}

func TestSymmetricAxis(t *testing.T) {
	for _, tc := range []struct{ max, end, step float64 }{
		{0, 1, 0.25}, {5, 6, 2}, {10.5, 15, 5}, {22, 30, 10}, {80, 100, 25}, {450, 600, 200},
	} {
		end, step := symmetricAxis(tc.max)
		if math.Abs(end-tc.end) > 1e-9 || math.Abs(step-tc.step) > 1e-9 {
			t.Errorf("symmetricAxis(%v) = %v, %v; want %v, %v", tc.max, end, step, tc.end, tc.step)
		}
		if end < tc.max || end/step > 4+1e-9 {
			t.Errorf("symmetricAxis(%v) = %v step %v: must cover the data in at most 4 steps", tc.max, end, step)
		}
	}
}

// One sample a side bounds nothing: the change is shown without an
// interval, not with one of no width.
func TestCompareOneSampleASideHasNoInterval(t *testing.T) {
	a := abSamples(1, map[string][]float64{"events_per_sec": {100}})
	b := abSamples(2, map[string][]float64{"events_per_sec": {90}})
	c := CompareRuns(store.Run{ID: 1}, a, store.Run{ID: 2}, b, DefaultCompareOptions)
	var table, page bytes.Buffer
	if err := WriteABTable(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteABHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"table": table.String(), "html": page.String()} {
		if !strings.Contains(out, "-10.0% [no interval]") || strings.Contains(out, "[-10.0, -10.0]") {
			t.Errorf("%s: want the change without an interval:\n%s", what, out)
		}
	}
}

// The JSON's keys are snake_case throughout, the options' too.
func TestCompareJSONKeysAreSnakeCase(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteABJSON(&buf, abFixture()); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if strings.ToLower(k) != k {
					t.Errorf("%s.%s is not snake_case", at, k)
				}
				walk(x, at+"."+k)
			}
		case []any:
			for _, x := range v {
				walk(x, at+"[]")
			}
		}
	}
	walk(doc, "$")
	if o, _ := doc["options"].(map[string]any); o["alpha"] != 0.01 || o["noise_floor"] != 0.05 || o["max_repetitions"] != 40.0 || o["equivalence"] != 0.05 {
		t.Errorf("options = %v", doc["options"])
	}
}
