package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/capacity"
	"github.com/vfleet/vfleet/internal/testutil"
)

// capacityScenario is a CPU-bound fleet of containers: on two CPUs, two
// guests each get a whole CPU, a third shares one with another.
const capacityScenario = `name: capacity
repetitions: 3
warmup: 0
duration: 1s
baseline: c
fleet:
  scale: [%s]
  idle: 500ms
  pinning: spread
guests:
  - {name: c, kind: container, runtime: runc}
workloads:
  - workload: cpu
`

// The bound leaves room for the machine's other work: two guests alone on
// their CPUs keep about all of their score, three get half for the worst.
const capacitySLO = "cpu.events_per_sec >= 0.6 alone"

func TestCapacityRefusesBadInput(t *testing.T) {
	c := newCLI(t)
	scaled := c.scenario(fmt.Sprintf(capacityScenario, "1, 8"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"capacity", scaled}, "give at least one --slo"},
		{[]string{"capacity", scaled, "--slo", "cpu.events_per_sec >= 0.8 alone", "--confidence", "1"}, "--confidence 1: want a level between 0 and 1"},
		{[]string{"capacity", scaled, "--slo", "cpu.events_per_sec >= 0.8 alone", "--max", "5000"}, "--max 5000: want a size between 1 and 4096"},
		{[]string{"capacity", scaled, "--slo", "cpu.events_per_sec >= 0.8 alone", "--max", "0"}, "--max 0: want a size between 1 and 4096"},
		{[]string{"capacity", scaled, "--slo", "cpu.events_per_sec >= 0.8 alone", "--max", "-1"}, "--max -1: want a size between 1 and 4096"},
		{[]string{"capacity", scaled, "--slo", "cpu.events_per_sec => 0.8"}, `--slo "cpu.events_per_sec => 0.8": column 20: "=" is not a comparison`},
		{[]string{"capacity", scaled, "--slo", "fio.read_iops >= 10"}, `column 1: the scenario has no workload "fio"; it can produce cpu.*`},
		{[]string{"capacity", "default", "--slo", "cpu.events_per_sec >= 0.8 alone"}, "fleet.scale: missing"},
	} {
		_, stderr, code := c.run(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want exit %d and %q", tc.args[2:], code, stderr, exitUsage, tc.want)
		}
	}
}

// capacityJSON is what `vfleet capacity --json` writes, as far as the tests
// read it.
type capacityJSON struct {
	ID     int64
	Result struct {
		Outcome      string
		Answer       int
		BandLow      int `json:"band_low"`
		BandHigh     int `json:"band_high"`
		Measurements int
		Points       []struct {
			Size         int
			Verdict      string
			Measurements []int64
		}
	}
}

// agrees tells whether a sweep's answer, read off its means, contradicts
// nothing the search decided: the search's answer holds at or below it,
// and no size the search showed to fail is at or below it. A size the
// search left undecided, and those above it it did not measure, are the
// sweep's to decide: its means decide without a confidence.
func (r capacityJSON) agrees(sweep int) bool {
	if sweep < r.Result.Answer {
		return false
	}
	for _, p := range r.Result.Points {
		if p.Verdict == "fails" && p.Size <= sweep {
			return false
		}
	}
	return true
}

func (c *cli) capacity(scale string, extra ...string) (capacityJSON, string, int) {
	c.t.Helper()
	out := c.work + "/capacity.json"
	args := append([]string{"capacity", c.scenario(fmt.Sprintf(capacityScenario, scale)), "--slo", capacitySLO, "--json", out}, extra...)
	stdout, stderr, code := c.run(args...)
	var res capacityJSON
	if b, err := os.ReadFile(out); err == nil {
		if err := json.Unmarshal(b, &res); err != nil {
			c.t.Fatal(err)
		}
	}
	return res, stdout + stderr, code
}

// sweepAnswer runs the scenario's sweep and reads the answer off it as one
// reads a curve: the largest size up to which the worst guest's mean
// score is still the bound's share of one guest's.
func (c *cli) sweepAnswer(scale string, share float64) int {
	c.t.Helper()
	if stdout, stderr, code := c.run("run", c.scenario(fmt.Sprintf(capacityScenario, scale)), "--html", "-"); code != 0 {
		c.t.Fatalf("sweep: exit %d\n%s\n%s", code, stdout, stderr)
	}
	out, _, code := c.run("report", "latest", "--format", "json")
	var rep struct {
		Samples []struct {
			Guest, Metric string
			WorkloadID    string `json:"workload_id"`
			Params        map[string]string
			Repetition    int
			Value         float64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		c.t.Fatalf("report json: %v (exit %d)", err, code)
	}
	// size → repetition → the worst guest's score
	worst := map[int]map[int]float64{}
	for _, s := range rep.Samples {
		if s.WorkloadID != "cpu" || s.Metric != "events_per_sec" {
			continue
		}
		size, _ := strconv.Atoi(s.Params["fleet_size"])
		if worst[size] == nil {
			worst[size] = map[int]float64{}
		}
		if v, ok := worst[size][s.Repetition]; !ok || s.Value < v {
			worst[size][s.Repetition] = s.Value
		}
	}
	mean := func(size int) float64 {
		sum := 0.0
		for _, v := range worst[size] {
			sum += v
		}
		return sum / float64(len(worst[size]))
	}
	var sizes []int
	for size := range worst {
		sizes = append(sizes, size)
	}
	sort.Ints(sizes)
	answer := 0
	for _, size := range sizes {
		if mean(size) < share*mean(1) {
			break
		}
		answer = size
	}
	return answer
}

// TestCapacityAgreesWithSweep: on this machine's CPUs, the search's answer
// for a CPU-bound SLO is the one a sweep of the same scenario gives.
func TestCapacityAgreesWithSweep(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	res, out, code := c.capacity("1, 8")
	if code != exitOK || res.Result.Outcome != "found" {
		t.Fatalf("exit %d, %+v\n%s", code, res.Result, out)
	}
	if !strings.Contains(out, "largest size that meets every SLO: ") || !strings.Contains(out, fmt.Sprintf("search %d stored", res.ID)) {
		t.Errorf("output lacks the answer or the stored search:\n%s", out)
	}
	if page, err := os.ReadFile(fmt.Sprintf("%s/vfleet-capacity-%d.html", c.work, res.ID)); err != nil || !strings.Contains(string(page), `<svg class="scaling"`) {
		t.Errorf("no HTML page with its plot: %v", err)
	}
	sweep := c.sweepAnswer("1, 2, 3, 4", 0.6)
	t.Logf("search: %d, undecided %d-%d (%+v); sweep: %d", res.Result.Answer, res.Result.BandLow, res.Result.BandHigh, res.Result.Points, sweep)
	if !res.agrees(sweep) {
		t.Errorf("search answered %d, undecided %d-%d (%+v), the sweep %d", res.Result.Answer, res.Result.BandLow, res.Result.BandHigh, res.Result.Points, sweep)
	}
}

// TestCapacitySearchAgainstSweep is the benchmark behind docs/fleet.md: the
// time to the search's answer against a sweep of every size from 1 to
// VFLEET_CAPACITY_BENCH guests (1 enables it with 8; the figure is
// 100, over half an hour here), and whether the two agree.
func TestCapacitySearchAgainstSweep(t *testing.T) {
	bench := os.Getenv("VFLEET_CAPACITY_BENCH")
	if bench == "" {
		t.Skip("a comparison of minutes; set VFLEET_CAPACITY_BENCH=1 (1 to 8 guests) or to the largest size to run it")
	}
	largest, err := strconv.Atoi(bench)
	if err != nil || largest < 1 {
		t.Fatalf("VFLEET_CAPACITY_BENCH=%s: want 1 or the largest size", bench)
	}
	if largest == 1 {
		largest = 8
	}
	testutil.RequiresRoot(t)
	testutil.Image(t)
	c := newCLI(t)
	began := time.Now()
	res, out, code := c.capacity(fmt.Sprintf("1, %d", largest))
	search := time.Since(began)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	t.Logf("search: %d, undecided %d-%d, in %s over %d runs (%+v)", res.Result.Answer, res.Result.BandLow, res.Result.BandHigh,
		search.Round(time.Second), res.Result.Measurements, res.Result.Points)
	sizes := make([]string, largest)
	for i := range sizes {
		sizes[i] = strconv.Itoa(i + 1)
	}
	began = time.Now()
	sweep := c.sweepAnswer(strings.Join(sizes, ", "), 0.6)
	swept := time.Since(began)
	t.Logf("sweep 1-%d: %d in %s; search/sweep time %.3f", largest, sweep, swept.Round(time.Second), search.Seconds()/swept.Seconds())
	if !res.agrees(sweep) {
		t.Errorf("search answered %d, undecided %d-%d, the sweep %d", res.Result.Answer, res.Result.BandLow, res.Result.BandHigh, sweep)
	}
}

// A search brought back from a machine names its runs by the ids they
// got here: every id, in every size and in the reference, is renumbered,
// and a search whose runs did not all come back is refused.
func TestRenumber(t *testing.T) {
	res := &capacity.Result{
		Reference: []int64{7},
		Points:    []capacity.Point{{Size: 1, Measurements: []int64{3, 7}}, {Size: 2, Measurements: []int64{5}}},
	}
	if err := renumber(res, []int64{11, 12, 13}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Reference, []int64{13}) || !slices.Equal(res.Points[0].Measurements, []int64{11, 13}) || !slices.Equal(res.Points[1].Measurements, []int64{12}) {
		t.Errorf("renumbered %+v", res)
	}
	if err := renumber(res, []int64{11, 12}); err == nil {
		t.Error("two runs back for a search of three: no error")
	}
}
