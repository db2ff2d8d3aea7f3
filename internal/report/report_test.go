package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fixture() (store.Run, []store.Sample, []store.Failure) {
	run := store.Run{
		ID: 7, ScenarioName: "default", ScenarioSource: "builtin:default", ScenarioText: []byte("name: default\n# <script>alert(1)</script>\n"),
		ScenarioHash: "0123456789abcdef0123", Baseline: "host", Started: t0, Finished: t0.Add(150 * time.Second), Status: store.StatusComplete,
		Host: hostinfo.Fingerprint{Hostname: "lab1", Kernel: "6.1.0", Arch: "x86_64", CPUModel: "Test CPU", Microcode: "0xf0",
			OnlineCPUs: 2, MemTotalKiB: 8 << 20, CgroupMode: "v2",
			VfleetVer: "dev", ToolVersions: map[string]string{"sysbench": "1.0.20", "fio": "3.33"}},
		Guests: map[string]store.GuestRecord{
			"host":      {Group: "host", Kind: "host"},
			"container": {Group: "container", Kind: "container", Runtime: "runc"},
			"vm-1":      {Group: "vm", Kind: "qemu"},
		},
	}
	var samples []store.Sample
	add := func(group, wl, metric, unit string, better workload.Better, values ...float64) {
		for rep, v := range values {
			samples = append(samples, store.Sample{RunID: 7, Guest: group, Group: group, Kind: run.Guests[group].Kind,
				Runtime: run.Guests[group].Runtime, WorkloadID: wl, Workload: strings.Split(wl, "-")[0],
				Params: workload.Params{"threads": "1"}, Repetition: rep, Metric: metric, Unit: unit, Value: v,
				Better: better, At: t0.Add(time.Duration(len(samples)) * time.Second), WallNS: 3e9, CPUNS: 29e8})
		}
	}
	// The container first, so the baseline-first ordering is exercised.
	add("container", "cpu", "events_per_sec", "events/s", workload.HigherIsBetter, 4100, 4120, 4110)
	add("host", "cpu", "events_per_sec", "events/s", workload.HigherIsBetter, 4280, 4290, 4285)
	add("host", "fio-randread", "read_clat_p99", "us", workload.LowerIsBetter, 100, 102, 101)
	add("container", "fio-randread", "read_clat_p99", "us", workload.LowerIsBetter, 150, 152, 151)
	add("host", "memory", "read_bw", "MB/s", workload.HigherIsBetter, 10000, 10100, 10050)
	failures := []store.Failure{{RunID: 7, Guest: "container", Group: "container", WorkloadID: "memory", Repetition: 0,
		Error: "exit status 2: stress-ng: error", Stderr: "stress-ng: error: out of memory\nmore", At: t0},
		// A guest that never came up: no workload, no repetition.
		{RunID: 7, Guest: "vm-1", Group: "vm", Repetition: -1, Error: "boot timed out", At: t0}}
	return run, samples, failures
}

func TestBuildNormalisesToBaselineFirst(t *testing.T) {
	c := Build(fixture())
	// The vm group only failed: it keeps a column, every cell of it missing.
	if len(c.Columns) != 3 || c.Columns[0].Group != "host" || !c.Columns[0].Baseline || c.Columns[1].Runtime != "runc" ||
		c.Columns[2].Label() != "vm [qemu]" {
		t.Fatalf("columns = %+v", c.Columns)
	}
	if len(c.Rows) != 3 || c.Rows[0].WorkloadID != "cpu" || c.Rows[1].WorkloadID != "fio-randread" {
		t.Fatalf("rows in first-seen order? %+v", c.Rows)
	}
	cpu := c.Rows[0]
	if r := cpu.Cells[0].Normalized.Ratio; r != 1 {
		t.Errorf("baseline ratio = %v, want 1", r)
	}
	if r := cpu.Cells[1].Normalized.Ratio; math.Abs(r-4110.0/4285.0) > 1e-12 {
		t.Errorf("container ratio = %v, want %v", r, 4110.0/4285.0)
	}
	if v := verdict(cpu.Cells[1], "higher"); v != -1 {
		t.Errorf("a clearly slower container must be worse, got %d", v)
	}
	// Latency: a higher ratio is worse.
	if v := verdict(c.Rows[1].Cells[1], "lower"); v != -1 {
		t.Errorf("a clearly higher latency must be worse, got %d", v)
	}
	// Overhead index: cpu 4110/4285 and fio p99 inverted 101/151, one term
	// per workload (memory has no container value and drops out).
	want := math.Sqrt((4110.0 / 4285.0) * (101.0 / 151.0))
	if idx := c.Index[1]; math.Abs(idx.Value-want) > 1e-9 || !(idx.Low <= idx.Value && idx.Value <= idx.High) || c.Index[0].Value != 1 {
		t.Errorf("index = %+v, want %v (baseline exactly 1)", c.Index, want)
	}
	if !math.IsNaN(c.Index[2].Value) {
		t.Errorf("a group without samples has no index: %+v", c.Index[2])
	}
	for _, r := range c.Rows {
		if r.Cells[2].Present {
			t.Errorf("%s: the vm never started, yet has a value", r.WorkloadID)
		}
	}
	mem := c.Rows[2]
	if !mem.Cells[0].Present || mem.Cells[1].Present {
		t.Errorf("memory: the failed container cell must be explicitly missing: %+v", mem.Cells)
	}
}

func TestBuildWithoutBaselineSamplesIsNotComparable(t *testing.T) {
	run, samples, _ := fixture()
	var noBase []store.Sample
	for _, s := range samples {
		if s.Group != "host" {
			noBase = append(noBase, s)
		}
	}
	c := Build(run, noBase, nil)
	for _, r := range c.Rows {
		for _, cell := range r.Cells {
			if cell.Comparable {
				t.Fatalf("cell comparable without a baseline value: %+v", cell)
			}
		}
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, c, noBase); err != nil {
		t.Fatalf("JSON must not choke on missing baselines: %v", err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", name, got)
	}
}

func TestTableGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, Build(fullFixture()), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\x1b") {
		t.Fatal("colour escapes without Color")
	}
	golden(t, "table.golden", buf.Bytes())
	buf.Reset()
	WriteTable(&buf, Build(fixture()), TableOptions{Color: true})
	if !strings.Contains(buf.String(), ansiRed) {
		t.Error("a worse cell is not red with Color")
	}
}

func TestCSVGolden(t *testing.T) {
	_, samples, _ := fixture()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, samples); err != nil {
		t.Fatal(err)
	}
	golden(t, "samples.csv.golden", buf.Bytes())
	if lines := strings.Count(buf.String(), "\n"); lines != len(samples)+1 {
		t.Fatalf("%d lines, want one per sample plus a header", lines)
	}
}

func TestHTMLGoldenAndSelfContained(t *testing.T) {
	run, samples, failures := fullFixture()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	golden(t, "report.html.golden", buf.Bytes())
	assertSelfContained(t, page)
	if strings.Contains(page, "<script>alert") {
		t.Fatal("scenario text not escaped")
	}
	for _, want := range []string{"<svg", "data:text/csv;base64,", "Test CPU", "sysbench", "out of memory", "<rect class=\"worse\"",
		"Latency distributions", `<polyline class="cdf"`, "container · path=xdp", "100 µs"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// assertSelfContained fails unless every link of the page points into the
// page itself (an anchor or a data: URI): whatever else a reader's browser
// would have to fetch, a report opened offline or from an archive would lack.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	if !strings.Contains(page, `href="data:text/csv;base64,`) {
		t.Error("the CSV download is missing")
	}
	for _, bad := range externalRefs(page) {
		t.Errorf("the page depends on something outside it: %s", bad)
	}
}

// externalRefs lists what in page points outside it.
func externalRefs(page string) []string {
	var bad []string
	attr := regexp.MustCompile(`(?i)\b(?:src|href|xlink:href|srcset|action|poster)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
	for _, m := range attr.FindAllStringSubmatch(page, -1) {
		v := strings.ToLower(strings.Trim(m[1], `"'`))
		if !strings.HasPrefix(v, "data:") && !strings.HasPrefix(v, "#") {
			bad = append(bad, m[0])
		}
	}
	for _, s := range []string{"url(", "@import", "http://", "https://"} {
		if strings.Contains(strings.ToLower(page), s) {
			bad = append(bad, s)
		}
	}
	return bad
}

func TestExternalRefsAreCaught(t *testing.T) {
	for page, want := range map[string]int{
		`<a href="data:text/csv;base64,AA">x</a><img src='https://cdn.example/x.png'>`: 2, // the src and its scheme
		`<a href="#top">x</a><link rel=stylesheet href=//cdn.example/s.css>`:           1,
		`<style>body{background:url(x.png)}</style>`:                                   1,
		`<a href="data:,">x</a><svg><rect class="a"/></svg>`:                           0,
	} {
		if got := externalRefs(page); len(got) != want {
			t.Errorf("externalRefs(%s) = %q, want %d", page, got, want)
		}
	}
}

func TestIncompleteRunIsFlagged(t *testing.T) {
	run, samples, failures := fixture()
	run.Status, run.StatusReason, run.Finished = store.StatusIncomplete, "interrupted (SIGINT)", time.Time{}
	var table, page bytes.Buffer
	WriteTable(&table, Build(run, samples, failures), TableOptions{})
	WriteHTML(&page, Build(run, samples, failures), samples)
	if !strings.Contains(table.String(), "this run is incomplete — interrupted (SIGINT)") ||
		!strings.Contains(page.String(), "This run is incomplete — interrupted (SIGINT)") {
		t.Fatal("an incomplete run must say so, and why")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	run, samples, failures := fixture()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Run struct {
			ID           int64      `json:"id"`
			ScenarioText string     `json:"scenario_text"`
			Finished     *time.Time `json:"finished"`
			Host         hostinfo.Fingerprint
		} `json:"run"`
		Rows     []Row         `json:"rows"`
		Samples  []jsonSample  `json:"samples"`
		Failures []jsonFailure `json:"failures"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Run.ID != 7 || !strings.HasPrefix(back.Run.ScenarioText, "name: default") || back.Run.Finished == nil ||
		back.Run.Host.CPUModel != "Test CPU" || len(back.Samples) != len(samples) || len(back.Rows) != 3 || len(back.Failures) != 2 {
		t.Fatalf("round trip lost data: %+v", back)
	}
	got, want := back.Samples[4], samples[4]
	if got.Value == nil || *got.Value != want.Value || got.Group != want.Group || got.Params["threads"] != "1" || !got.At.Equal(want.At) {
		t.Fatalf("sample 4 = %+v, want %+v", got, want)
	}
	if r := back.Rows[0]; r.Cells[1].Summary.N != 3 || r.Cells[1].Normalized.Ratio != 4110.0/4285.0 {
		t.Fatalf("row 0 = %+v", r)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []string{"table", "html", "json", "csv"} {
		if _, err := ParseFormat(f); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseFormat("pdf"); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "table, html, json, csv") {
		t.Fatalf("err = %v", err)
	}
}

// TestZeroAndNonFiniteAreSafe: a zero baseline cannot be normalised to, and
// NaN or infinite values are not measurements; neither may leak "NaN" into
// a rendering or break the JSON encoder.
func TestZeroAndNonFiniteAreSafe(t *testing.T) {
	run, _, _ := fixture()
	run.Guests = nil // kinds must then come from the samples
	mk := func(group, wl string, v float64) store.Sample {
		return store.Sample{RunID: 7, Guest: group + "-1", Group: group, Kind: group, WorkloadID: wl, Metric: "m", Unit: "u",
			Value: v, Better: workload.HigherIsBetter, At: t0}
	}
	samples := []store.Sample{
		mk("container", "zero", 5), mk("host", "zero", 0), mk("host", "zero", 0),
		mk("host", "nan<b>", 10), mk("host", "nan<b>", math.NaN()), mk("container", "nan<b>", math.Inf(1)), mk("container", "nan<b>", 9),
		mk("container", "allnan", math.NaN()),
	}
	c := Build(run, samples, nil)
	if c.Columns[0].Group != "host" || c.Columns[0].Kind != "host" || c.Columns[1].Kind != "container" {
		t.Fatalf("columns = %+v", c.Columns)
	}
	if c.NonFinite != 3 {
		t.Errorf("NonFinite = %d, want 3", c.NonFinite)
	}
	zero, nan, allNaN := c.Rows[0], c.Rows[1], c.Rows[2]
	if !zero.Cells[0].Present || zero.Cells[0].Comparable || zero.Cells[1].Comparable {
		t.Errorf("a zero baseline must leave cells present but not comparable: %+v", zero.Cells)
	}
	if n := nan.Cells[1]; !n.Comparable || n.Summary.N != 1 || n.Normalized.Ratio != 0.9 || nan.Cells[0].Normalized.Ratio != 1 {
		t.Errorf("non-finite values must be left out, the rest compared: %+v", nan.Cells)
	}
	if allNaN.Cells[0].Present || allNaN.Cells[1].Present {
		t.Errorf("a row of only NaN has no value anywhere: %+v", allNaN.Cells)
	}
	// Only the nan<b> row scores: the zero baseline cannot be divided by.
	if math.Abs(c.Index[1].Value-0.9) > 1e-12 {
		t.Errorf("index = %+v", c.Index)
	}
	var table, page, js bytes.Buffer
	if err := WriteTable(&table, c, TableOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, c, samples); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, c, samples); err != nil {
		t.Fatalf("JSON must carry zeros and NaN: %v", err)
	}
	note := nonFiniteNote(3)
	for name, out := range map[string]string{"table": table.String(), "html": page.String()} {
		if !strings.Contains(out, note) {
			t.Errorf("%s does not say values were left out", name)
		}
		if out = strings.ReplaceAll(out, note, ""); strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
			t.Errorf("%s shows a non-finite number:\n%s", name, out)
		}
	}
	if n := strings.Count(page.String(), "<svg"); n != 1 {
		t.Errorf("%d charts, want 1: only nan<b> has a baseline value to plot", n)
	}
	if strings.Contains(page.String(), "nan<b>") {
		t.Error("a workload id reached the page unescaped")
	}
	if !strings.Contains(table.String(), "n/a (0 u)") {
		t.Errorf("a zero baseline must show n/a with the raw value:\n%s", table.String())
	}
	var back struct{ Samples []jsonSample }
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Samples[4].Value != nil || *back.Samples[3].Value != 10 {
		t.Fatalf("json: %v %+v", err, back.Samples)
	}
}

func TestBetterIsGreenWorseIsRed(t *testing.T) {
	run, samples, failures := fixture()
	for i, s := range samples {
		if s.Group == "container" && s.WorkloadID == "fio-randread" {
			samples[i].Value -= 80 // latency 71 us against the host's 101: better
		}
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, Build(run, samples, failures), TableOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	// The main table ends at the first blank line; the blocks after it
	// (tool CPU) start their lines with workload ids too.
	mainTable, _, _ := strings.Cut(buf.String(), "\n\n")
	for _, l := range strings.Split(mainTable, "\n") {
		switch {
		case strings.HasPrefix(l, "cpu "):
			seen++
			if !strings.Contains(l, ansiRed+"0.96") || strings.Contains(l, ansiGreen) {
				t.Errorf("slower cpu must be red only: %q", l)
			}
		case strings.HasPrefix(l, "fio-randread "):
			seen++
			if !strings.Contains(l, ansiGreen+"0.70") || strings.Contains(l, ansiRed) {
				t.Errorf("lower latency must be green only: %q", l)
			}
			if strings.Contains(l, ansiGreen+"1.00") {
				t.Errorf("the baseline is never coloured: %q", l)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of the 2 rows checked:\n%s", seen, buf.String())
	}
}

func TestAxisStaysReadable(t *testing.T) {
	for _, tc := range []struct{ max, end, step float64 }{
		{0.9, 1.25, 0.25}, {1.3, 1.5, 0.25}, {1.9, 2, 0.25}, {2, 2.5, 0.5}, {3, 3.5, 0.5}, {40, 50, 10},
	} {
		end, step := axis(tc.max)
		if end != tc.end || step != tc.step {
			t.Errorf("axis(%v) = %v, %v; want %v, %v", tc.max, end, step, tc.end, tc.step)
		}
		if end < tc.max || end/step > axisTicks {
			t.Errorf("axis(%v) = %v step %v: must cover the data in at most %d ticks", tc.max, end, step, axisTicks)
		}
	}
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteErrorsAreReturned(t *testing.T) {
	run, samples, failures := fixture()
	c := Build(run, samples, failures)
	for name, err := range map[string]error{
		"table": WriteTable(failingWriter{}, c, TableOptions{}),
		"html":  WriteHTML(failingWriter{}, c, samples),
		"json":  WriteJSON(failingWriter{}, c, samples),
		"csv":   WriteCSV(failingWriter{}, samples),
		"ab":    WriteABTable(failingWriter{}, CompareRuns(run, samples, run, samples, DefaultCompareOptions), TableOptions{}),
	} {
		if !errors.Is(err, errDiskFull) {
			t.Errorf("%s: err = %v, want the writer's error", name, err)
		}
	}
}

func TestHTMLShowsOnlyTheEndOfAHugeStderr(t *testing.T) {
	run, samples, failures := fixture()
	failures[0].Stderr = strings.Repeat("noise\n", 100000) + "the real reason"
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	// The JSON download is the whole export, stderr and all; what the page
	// shows is bounded.
	shown := dataURI.ReplaceAllString(buf.String(), `"data:"`)
	if !strings.Contains(shown, "the real reason") || len(shown) > 200000 {
		t.Fatalf("page of %d bytes outside its downloads; the end of stderr shown: %v", len(shown), strings.Contains(shown, "the real reason"))
	}
	js := downloaded(t, buf.String(), "application/json")
	if !bytes.Contains(js, []byte(strings.Repeat(`noise\n`, 1000))) {
		t.Error("the JSON download must keep the whole stderr")
	}
}

var dataURI = regexp.MustCompile(`"data:[^"]*"`)

// downloaded decodes the page's data: URI of the given media type.
func downloaded(t *testing.T, page, mediaType string) []byte {
	t.Helper()
	prefix := `href="data:` + mediaType + `;base64,`
	_, rest, ok := strings.Cut(page, prefix)
	if !ok {
		t.Fatalf("the page has no %s download", mediaType)
	}
	enc, _, _ := strings.Cut(rest, `"`)
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("%s download: %v", mediaType, err)
	}
	return b
}

func TestRatesAndSizesReadWithPrefixes(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{9585128886, "bit/s", "9.59 Gbit/s"},
		{238319159, "bit/s", "238.3 Mbit/s"},
		{4794864771, "bit/s per core", "4.79 Gbit/s per core"},
		{512, "bit/s", "512.0 bit/s"},
		{18899, "IOPS", "18899 IOPS"},
		{math.NaN(), "bit/s", "n/a bit/s"},
		{265713664, "B", "253.4 MiB"},
		{339968, "B", "332.0 KiB"},
		{512, "B", "512.0 B"},
	} {
		if got := formatQuantity(c.v, c.unit); got != c.want {
			t.Errorf("formatQuantity(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

// A run whose pinned guests outnumbered the CPUs says so in both reports;
// one whose guests had CPUs of their own does not.
func TestReportsSayWhenGuestsShareCPUs(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	run := store.Run{ID: 1, ScenarioName: "s", Baseline: "vm", Status: store.StatusComplete, Started: t0, Finished: t0.Add(time.Minute),
		Guests: map[string]store.GuestRecord{
			"vm-0": {Group: "vm", Kind: "vm", Details: map[string]string{"pinning": "spread", "oversubscription": "50.00"}},
			"vm-1": {Group: "vm", Kind: "vm", Details: map[string]string{"pinning": "spread", "oversubscription": "50.00"}},
		}}
	samples := []store.Sample{{RunID: 1, Guest: "vm-0", Group: "vm", Kind: "vm", WorkloadID: "cpu", Workload: "cpu",
		Metric: "events_per_sec", Unit: "events/s", Value: 10, Better: workload.HigherIsBetter, At: t0}}
	for _, shared := range []bool{true, false} {
		if !shared {
			for name, g := range run.Guests {
				delete(g.Details, "oversubscription")
				run.Guests[name] = g
			}
		}
		c := Build(run, samples, nil)
		var table, page bytes.Buffer
		if err := WriteTable(&table, c, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(&page, c, samples); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"table": table.String(), "html": page.String()} {
			if got := strings.Contains(out, "guests share CPUs") && strings.Contains(out, "vm 50.00×"); got != shared {
				t.Errorf("%s: says guests share CPUs: %v, want %v\n%s", name, got, shared, out)
			}
		}
	}
}

// A VM's column says its architecture and accelerator: an emulated guest
// must not read as a KVM one.
func TestColumnLabelSaysEmulation(t *testing.T) {
	for _, c := range []struct {
		col  Column
		want string
	}{
		{Column{Group: "host", Kind: "host"}, "host"},
		{Column{Group: "c", Kind: "container", Runtime: "runc"}, "c [container] (runc)"},
		{Column{Group: "vm-arm", Kind: "vm", Runtime: "virt", Arch: "arm64", Accel: "tcg"}, "vm-arm [vm] (virt arm64 tcg)"},
		{Column{Group: "vm", Kind: "vm", Runtime: "q35", Arch: "amd64", Accel: "kvm"}, "vm (q35 amd64 kvm)"},
		{Column{Group: "container", Kind: "container", Runtime: "runsc", Platform: "ptrace"}, "container (runsc ptrace)"},
		{Column{Group: "lv", Kind: "vm", Runtime: "q35", Arch: "amd64", Accel: "tcg", Libvirt: "qemu:///system"}, "lv [vm] (q35 amd64 tcg libvirt)"},
	} {
		if got := c.col.Label(); got != c.want {
			t.Errorf("Label() = %q, want %q", got, c.want)
		}
	}
}

// A gVisor group's column says its sandbox's platform, from the stored
// guest record.
func TestColumnOfARunscGroupSaysItsPlatform(t *testing.T) {
	run, samples, failures := fixture()
	run.Guests["container"] = store.GuestRecord{Group: "container", Kind: "container", Runtime: "runsc",
		Details: map[string]string{"platform": "ptrace", "security": "default"}}
	c := Build(run, samples, failures)
	for _, col := range c.Columns {
		if col.Group == "container" && col.Label() != "container (runsc ptrace)" {
			t.Errorf("label %q", col.Label())
		}
	}
}

func TestImportedRunSaysWhereItWasMeasured(t *testing.T) {
	run, samples, failures := fixture()
	run.Origin = "ssh://root@198.18.0.2:22"
	c := Build(run, samples, failures)
	var table, page bytes.Buffer
	if err := WriteTable(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(table.String(), "\n"); !strings.HasSuffix(first, " · measured on ssh://root@198.18.0.2:22") {
		t.Errorf("the table's first line does not say where the run was measured: %q", first)
	}
	if err := WriteHTML(&page, c, samples); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<th>measured on</th><td>ssh://root@198.18.0.2:22</td>") {
		t.Error("the page does not say where the run was measured")
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, c, samples); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"origin": "ssh://root@198.18.0.2:22"`) {
		t.Error("the JSON report does not say where the run was measured")
	}
}

// A group spread over several hosts' libvirt says which, from its guests'
// records; a group all on this host's libvirt says libvirt only.
func TestColumnOfASpreadGroupNamesItsHosts(t *testing.T) {
	run, samples, failures := fixture()
	local := map[string]string{"arch": "amd64", "accel": "tcg", "libvirt": "qemu:///system"}
	remote := map[string]string{"arch": "amd64", "accel": "tcg", "libvirt": "qemu+ssh://root@lab2/system", "libvirt_host": "lab2"}
	delete(run.Guests, "container")
	for name, d := range map[string]map[string]string{"container-0": local, "container-1": remote, "container-2": local, "container-3": remote} {
		run.Guests[name] = store.GuestRecord{Group: "container", Kind: "vm", Runtime: "q35", Details: d}
	}
	c := Build(run, samples, failures)
	var col Column
	for _, col = range c.Columns {
		if col.Group == "container" {
			break
		}
	}
	if want := "container [vm] (q35 amd64 tcg libvirt on this host, lab2)"; col.Label() != want || !slices.Equal(col.Hosts, []string{"this host", "lab2"}) {
		t.Errorf("label %q hosts %v, want %q", col.Label(), col.Hosts, want)
	}
	for name := range run.Guests {
		if run.Guests[name].Group == "container" {
			run.Guests[name] = store.GuestRecord{Group: "container", Kind: "vm", Runtime: "q35", Details: local}
		}
	}
	for _, col := range Build(run, samples, failures).Columns {
		if col.Group == "container" && (col.Hosts != nil || col.Label() != "container [vm] (q35 amd64 tcg libvirt)") {
			t.Errorf("all on this host: label %q hosts %v", col.Label(), col.Hosts)
		}
	}
}
