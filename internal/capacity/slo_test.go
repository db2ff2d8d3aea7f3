package capacity

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

var catalog = Catalog{
	"cpu": {"events_per_sec"},
	"fio": {"read_iops", "read_clat_p99"},
	"rr":  nil, // metrics known only once it ran
}

func TestParseSLO(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want SLO
	}{
		{"cpu.events_per_sec >= 0.8 alone", SLO{Scope: ScopeEvery, WorkloadID: "cpu", Metric: "events_per_sec", AtLeast: true, Bound: 0.8, Alone: true}},
		{"median cpu.events_per_sec>=80% alone", SLO{Scope: ScopeMedian, WorkloadID: "cpu", Metric: "events_per_sec", AtLeast: true, Bound: 0.8, Alone: true}},
		{"rr.net.rtt_us.p99 <= 500us", SLO{Scope: ScopeEvery, WorkloadID: "rr", Metric: "net.rtt_us.p99", Bound: 500e-6, Duration: true}},
		{"every rr.net.rtt_us.p99<=2ms", SLO{Scope: ScopeEvery, WorkloadID: "rr", Metric: "net.rtt_us.p99", Bound: 2e-3, Duration: true}},
		{"total fio.read_iops >= 2000", SLO{Scope: ScopeTotal, WorkloadID: "fio", Metric: "read_iops", AtLeast: true, Bound: 2000}},
		{"  fio.read_clat_p99 <= 1.5e3 ", SLO{Scope: ScopeEvery, WorkloadID: "fio", Metric: "read_clat_p99", Bound: 1500}},
	} {
		got, err := ParseSLO(tc.expr, catalog)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		tc.want.Text = tc.expr
		if got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.expr, got, tc.want)
		}
	}
}

func TestParseSLOErrors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		col  int
		msg  string
	}{
		{"", 1, "empty"},
		{"cpu >= 0.8", 1, `"cpu" is not WORKLOAD_ID.METRIC; the scenario can produce cpu.events_per_sec, fio.read_clat_p99, fio.read_iops, rr.*`},
		{"disk.read_iops >= 2", 1, `the scenario has no workload "disk"`},
		{"cpu.events >= 0.8 alone", 5, `workload cpu reports no metric "events"; the scenario can produce cpu.events_per_sec`},
		{"median", 7, "want a metric"},
		{"cpu.events_per_sec", 19, "want >= or <= after the metric"},
		{"cpu.events_per_sec == 2", 20, `"==" is not a comparison`},
		{"cpu.events_per_sec > 2", 20, `">" is not a comparison`},
		{"cpu.events_per_sec >= ", 23, "want a number"},
		{"cpu.events_per_sec >= fast", 23, `"fast" is not a bound: want a finite number`},
		{"cpu.events_per_sec >= 2kb", 23, `unknown unit "kb"`},
		{"cpu.events_per_sec >= 0.8 alon", 27, `"alon" is not allowed here: want alone`},
		{"rr.net.rtt_us.p99 <= 5ms alone", 26, "takes no time unit"},
		{"cpu.events_per_sec >= 0.8 alone twice", 33, `unexpected "twice"`},
		{"average cpu.events_per_sec >= 1", 1, `"average" is not WORKLOAD_ID.METRIC`},
	} {
		_, err := ParseSLO(tc.expr, catalog)
		var se *SLOError
		if !errors.As(err, &se) || !errors.Is(err, ErrSLO) {
			t.Errorf("%q: got %v, want an SLOError", tc.expr, err)
			continue
		}
		if se.Column != tc.col || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%q: got column %d %q, want column %d %q", tc.expr, se.Column, se.Msg, tc.col, tc.msg)
		}
	}
}

func TestCheckMeasured(t *testing.T) {
	rtt, _ := ParseSLO("rr.net.rtt_us.p99 <= 500us", catalog)
	samples := []Sample{{Metric: "rr.net.rtt_us.p99", Unit: "us"}, {Metric: "rr.net.rtt_us.p50", Unit: "us"}}
	if err := CheckMeasured([]SLO{rtt}, samples); err != nil {
		t.Fatal(err)
	}
	typo, _ := ParseSLO("rr.net.rtt_us.p98 <= 500us", catalog)
	err := CheckMeasured([]SLO{typo}, samples)
	if !errors.Is(err, ErrUnknownMetric) || !strings.Contains(err.Error(), "it reported rr.net.rtt_us.p50, rr.net.rtt_us.p99") {
		t.Errorf("unknown metric: %v", err)
	}
	err = CheckMeasured([]SLO{rtt}, []Sample{{Metric: "rr.net.rtt_us.p99", Unit: "bit/s"}})
	if !errors.Is(err, ErrUnit) {
		t.Errorf("a duration bound on a rate: %v", err)
	}
}

// TestCheckJSON: a ratio to an alone figure of 0 is not a number; the
// search's record must still encode, and say what the null was.
func TestCheckJSON(t *testing.T) {
	b, err := json.Marshal(Check{SLO: 1, Value: math.NaN(), Low: math.Inf(-1), High: 2, N: 3, Verdict: Undecided})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"slo":1,"value":null,"ci_low":null,"ci_high":2,"n":3,"verdict":"undecided","look":0,"level":0,"non_finite":{"ci_low":"-Inf","value":"NaN"}}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
