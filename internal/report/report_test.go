package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
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
		Host: hostinfo.Fingerprint{Hostname: "lab1", Kernel: "6.1.0", CPUModel: "Test CPU", OnlineCPUs: 2, CgroupMode: "v2",
			VfleetVer: "dev", ToolVersions: map[string]string{"sysbench": "1.0.20", "fio": "3.33"}},
		Guests: map[string]store.GuestRecord{
			"host":      {Group: "host", Kind: "host"},
			"container": {Group: "container", Kind: "container", Runtime: "runc"},
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
		Error: "exit status 2: stress-ng: error", Stderr: "stress-ng: error: out of memory\nmore", At: t0}}
	return run, samples, failures
}

func TestBuildNormalisesToBaselineFirst(t *testing.T) {
	c := Build(fixture())
	if len(c.Columns) != 2 || c.Columns[0].Group != "host" || !c.Columns[0].Baseline || c.Columns[1].Runtime != "runc" {
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
	if err := WriteTable(&buf, Build(fixture()), TableOptions{}); err != nil {
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
	run, samples, failures := fixture()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	golden(t, "report.html.golden", buf.Bytes())
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).MatchString(page) {
		t.Fatal("the report references an external resource")
	}
	if strings.Contains(page, "<script>alert") {
		t.Fatal("scenario text not escaped")
	}
	for _, want := range []string{"<svg", "data:text/csv;base64,", "Test CPU", "sysbench", "out of memory", "<rect class=\"worse\""} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestIncompleteRunIsFlagged(t *testing.T) {
	run, samples, failures := fixture()
	run.Status, run.Finished = store.StatusIncomplete, time.Time{}
	var table, page bytes.Buffer
	WriteTable(&table, Build(run, samples, failures), TableOptions{})
	WriteHTML(&page, Build(run, samples, failures), samples)
	if !strings.Contains(table.String(), "this run is incomplete") || !strings.Contains(page.String(), "did not complete") {
		t.Fatal("an incomplete run must say so")
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
			ID           int64
			ScenarioText string
		} `json:"run"`
		Rows    []Row          `json:"rows"`
		Samples []store.Sample `json:"samples"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Run.ID != 7 || !strings.HasPrefix(back.Run.ScenarioText, "name: default") || len(back.Samples) != len(samples) || len(back.Rows) != 3 {
		t.Fatalf("round trip lost data: %+v", back.Run)
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
