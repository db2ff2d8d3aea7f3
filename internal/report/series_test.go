package report

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// seriesFixture is twelve daily runs of one scenario on lab1: the host's
// events/s steady, the container's dropping from about 90% of it to 70%
// from the seventh run (id 107) on, and a STREAM entry with its headline
// kernels beside a metric that is none.
func seriesFixture() ([]store.Run, [][]store.Sample) {
	rng := rand.New(rand.NewPCG(5, 5))
	var runs []store.Run
	var samples [][]store.Sample
	for i := range 12 {
		id := int64(101 + i)
		run := store.Run{ID: id, ScenarioName: "default", ScenarioHash: "abc", Baseline: "host", Status: store.StatusComplete,
			Started: t0.Add(time.Duration(i) * 24 * time.Hour),
			Host:    hostinfo.Fingerprint{Hostname: "lab1", Arch: "x86_64", CPUModel: "Test CPU", Kernel: "6.1.0"}}
		var ss []store.Sample
		add := func(group, entry, wl, metric, unit string, level float64) {
			for rep := range 3 {
				ss = append(ss, store.Sample{RunID: id, Guest: group, Group: group, Kind: group, WorkloadID: entry, Workload: wl,
					Repetition: rep, Metric: metric, Unit: unit, Value: level * (1 + 0.01*(2*rng.Float64()-1)), Better: workload.HigherIsBetter})
			}
		}
		ratio := 0.9
		if i >= 6 {
			ratio = 0.7
		}
		for _, g := range []string{"host", "container"} {
			f := 1.0
			if g == "container" {
				f = ratio
			}
			add(g, "cpu", "cpu", "events_per_sec", "events/s", 1000*f)
			add(g, "cpu", "cpu", "latency_avg", "ms", 2/f)
			add(g, "stream", "stream", "copy_mbps", "MB/s", 9000*f)
			add(g, "stream", "stream", "threads", "", 2)
			add(g, "stream", "stream", "triad_mbps", "MB/s", 9500*f)
		}
		runs, samples = append(runs, run), append(samples, ss)
	}
	return runs, samples
}

func TestBuildSeriesFindsTheContainersStep(t *testing.T) {
	runs, samples := seriesFixture()
	s := BuildSeries(runs, samples, stats.DefaultChangePointOptions)
	var names []string
	for _, m := range s.Metrics {
		names = append(names, m.WorkloadID+" "+m.Metric)
	}
	// cpu's first metric; STREAM's headline kernels, not its thread count.
	if got := strings.Join(names, ", "); got != "cpu events_per_sec, stream copy_mbps, stream triad_mbps" {
		t.Fatalf("metrics = %s", got)
	}
	if s.Machine != "lab1 (x86_64, Test CPU)" || s.Scenario != "default" {
		t.Fatalf("machine %q, scenario %q", s.Machine, s.Scenario)
	}
	for _, m := range s.Metrics {
		if len(m.Groups) != 2 || m.Groups[0].Group != "host" || !m.Groups[0].Baseline {
			t.Fatalf("%s: groups %+v", m.Metric, m.Groups)
		}
		if cps := m.Groups[0].ChangePoints; len(cps) != 0 {
			t.Errorf("%s: the steady host changed at %+v", m.Metric, cps)
		}
		if cps := m.Groups[1].ChangePoints; len(cps) != 1 || cps[0].Index != 6 {
			t.Errorf("%s: the container's change points = %+v, want one at index 6 (run 107)", m.Metric, cps)
		}
	}
}

func TestSeriesTableAndJSON(t *testing.T) {
	runs, samples := seriesFixture()
	s := BuildSeries(runs, samples, stats.DefaultChangePointOptions)
	var buf bytes.Buffer
	if err := WriteSeriesTable(&buf, s, TableOptions{Width: 100}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"scenario default on lab1 (x86_64, Test CPU) · 12 complete runs",
		"E-divisive means", "2026-11-28 10:00  107  ", "◆ 695.0 events/s (0.69)", "◆ changed: container at run 107",
		"  container  ██████▆▆▆▆▆▆"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Each metric's container once in its table and once in its summary line.
	if n := strings.Count(out, "◆"); n != 6 {
		t.Errorf("%d markers, want one per change in each table and each summary line:\n%s", n, out)
	}
	buf.Reset()
	if err := WriteSeriesJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs    []struct{ ID int64 } `json:"runs"`
		Metrics []struct {
			Metric string `json:"metric"`
			Groups []struct {
				Group        string              `json:"group"`
				Cells        []Cell              `json:"cells"`
				ChangePoints []stats.ChangePoint `json:"change_points"`
			} `json:"groups"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 12 || len(got.Metrics) != 3 || len(got.Metrics[0].Groups[1].Cells) != 12 ||
		len(got.Metrics[0].Groups[1].ChangePoints) != 1 || got.Metrics[0].Groups[1].ChangePoints[0].Index != 6 {
		t.Fatalf("JSON = %s", buf.String())
	}
}

func TestSeriesHTML(t *testing.T) {
	runs, samples := seriesFixture()
	var buf bytes.Buffer
	if err := WriteSeriesHTML(&buf, BuildSeries(runs, samples, stats.DefaultChangePointOptions)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if bad := externalRefs(page); len(bad) > 0 {
		t.Errorf("the page depends on something outside it: %v", bad)
	}
	// The container is the second group: its change drawn in the second colour, once per metric.
	if n := strings.Count(page, `<line class="change" stroke="`+cdfPalette[1]+`"`); n != 3 {
		t.Errorf("%d change lines of the container, want one per metric", n)
	}
	for _, want := range []string{"default over time on lab1 (x86_64, Test CPU)", `<polyline class="series"`,
		"container changed at run 107", "E-divisive means", "◆ 695.0 events/s (0.69)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestSeriesHTMLPlotsInStartOrder: ids follow the order runs reached the
// store, so runs imported later have higher ids than runs made here after
// them. The plot's x is the place in the series, each tick named by its
// run's id, and the change drawn at the run it names.
func TestSeriesHTMLPlotsInStartOrder(t *testing.T) {
	runs, samples := seriesFixture()
	var ids []string
	for i := range runs {
		runs[i].ID = int64(201 + (i+6)%12) // the first six imported after the rest
		ids = append(ids, strconv.FormatInt(runs[i].ID, 10))
	}
	var buf bytes.Buffer
	if err := WriteSeriesHTML(&buf, BuildSeries(runs, samples, stats.DefaultChangePointOptions)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	chart := page[strings.Index(page, "<svg"):strings.Index(page, "</svg>")]
	var ticks []string
	for _, m := range regexp.MustCompile(`text-anchor="middle">(\d+)</text>`).FindAllStringSubmatch(chart, -1) {
		ticks = append(ticks, m[1])
	}
	if !slices.Equal(ticks, ids) {
		t.Errorf("x ticks %v, want the runs' ids in start order %v", ticks, ids)
	}
	points := regexp.MustCompile(`<polyline class="series"[^>]* points="([^"]*)"`).FindStringSubmatch(chart)
	if points == nil {
		t.Fatalf("no line in the first plot:\n%s", chart)
	}
	last := math.Inf(-1)
	for _, pt := range strings.Fields(points[1]) {
		x, err := strconv.ParseFloat(strings.Split(pt, ",")[0], 64)
		if err != nil || x <= last {
			t.Fatalf("the line goes back along x at %s: %s", pt, points[1])
		}
		last = x
	}
	if !strings.Contains(chart, "container changed at run 201") {
		t.Errorf("the change must be at the seventh run, id 201:\n%s", chart)
	}
}

// TestSeriesHTMLRendersInABrowser: both groups' lines must be on screen.
func TestSeriesHTMLRendersInABrowser(t *testing.T) {
	runs, samples := seriesFixture()
	var page bytes.Buffer
	if err := WriteSeriesHTML(&page, BuildSeries(runs, samples, stats.DefaultChangePointOptions)); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 3000)
	requireColours(t, img, map[string][3]uint32{"host's line": {0x00, 0x72, 0xb2}, "container's line and change": {0xd5, 0x5e, 0x00}}, 200)
}

// TestSeriesMarksAChangedScenario: a run whose scenario text differs from
// the run before it is marked, a metric with no change says so.
func TestSeriesMarksAChangedScenario(t *testing.T) {
	runs, samples := seriesFixture()
	for i := 6; i < len(runs); i++ {
		runs[i].ScenarioHash = "def"
	}
	var buf bytes.Buffer
	s := BuildSeries(runs, samples, stats.DefaultChangePointOptions)
	if err := WriteSeriesTable(&buf, s, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "107 ✎") != 3 || strings.Count(out, "108 ✎") != 0 {
		t.Errorf("run 107 must be marked in each table, the runs after it not:\n%s", out)
	}
	// Once, with the header: it is of the runs, not of a metric.
	if n := strings.Count(out, textChangedNote); n != 1 || strings.Index(out, textChangedNote) > strings.Index(out, "\n\n") {
		t.Errorf("the note on the scenario's text %d times, want once after the header:\n%s", n, out)
	}
	buf.Reset()
	if err := WriteSeriesTable(&buf, BuildSeries(runs[:6], samples[:6], stats.DefaultChangePointOptions), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Count(out, "no change point") != 3 || strings.Contains(out, "✎") {
		t.Errorf("six steady runs of one text:\n%s", out)
	}
}

func TestSparkline(t *testing.T) {
	cell := func(v float64) Cell { return Cell{Present: true, Summary: stats.Summary{Mean: v}} }
	for _, tc := range []struct {
		cells []Cell
		want  string
	}{
		{[]Cell{cell(10), cell(10), cell(3), {}, cell(3)}, "██▃ ▃"},
		{[]Cell{cell(0), cell(7), cell(3.5), cell(14)}, "▁▅▃█"},
		// Noise of a percent is no cliff.
		{[]Cell{cell(100), cell(99), cell(101)}, "███"},
		{[]Cell{cell(-2), cell(2)}, "▁█"},
		{[]Cell{cell(5), {}}, "█"},
		{[]Cell{cell(0), cell(0)}, "▅▅"},
	} {
		if got := sparkline(tc.cells); got != tc.want {
			t.Errorf("sparkline = %q, want %q", got, tc.want)
		}
	}
}
