package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// acrossFixture is the fixture's scenario on two machines: lab1 (x86_64)
// and lab2, an arm64 machine whose container pays more against its own,
// slower baseline and which did not measure fio.
func acrossFixture() []Comparison {
	run, samples, failures := fixture()
	other := run
	other.ID, other.Started = 9, run.Started.Add(3600e9)
	other.Host = hostinfo.Fingerprint{Hostname: "lab2", Kernel: "6.1.0-arm", Arch: "aarch64", CPUModel: "Neoverse-N1", OnlineCPUs: 4}
	// Brought back from the machine it ran on (run --on, or an import).
	other.Origin = "ssh://root@lab2:22"
	var otherSamples []store.Sample
	for _, s := range samples {
		if s.WorkloadID == "fio-randread" {
			continue
		}
		s.RunID = 9
		if s.Group == "container" {
			s.Value *= 0.5
		} else {
			s.Value *= 0.6
		}
		otherSamples = append(otherSamples, s)
	}
	return []Comparison{Build(run, samples, failures), Build(other, otherSamples, nil)}
}

func TestBuildAcrossAlignsRowsPerMachine(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Machines) != 2 || a.Machines[0].Label != "lab1 (x86_64, 6.1.0)" || a.Machines[1].Label != "lab2 (aarch64, 6.1.0-arm)" {
		t.Fatalf("machines = %q, %q", a.Machines[0].Label, a.Machines[1].Label)
	}
	if len(a.Rows) != 3 || a.Rows[1].WorkloadID != "fio-randread" {
		t.Fatalf("rows = %+v", a.Rows)
	}
	for _, m := range a.Machines {
		if len(m.Comparison.Rows) != len(a.Rows) {
			t.Fatalf("%s: %d rows, want %d parallel to the comparison's", m.Label, len(m.Comparison.Rows), len(a.Rows))
		}
	}
	fio := a.Machines[1].Comparison.Rows[1]
	if fio.Metric != "read_clat_p99" || len(fio.Cells) != len(a.Machines[1].Comparison.Columns) || fio.Cells[0].Present {
		t.Fatalf("lab2 never measured fio: its row must be there with no cell present: %+v", fio)
	}
	// Each machine against its own baseline: lab2's container is 0.5/0.6 of lab1's ratio.
	r1, r2 := a.Machines[0].Comparison.Rows[0].Cells[1].Normalized.Ratio, a.Machines[1].Comparison.Rows[0].Cells[1].Normalized.Ratio
	if d := r2 - r1*0.5/0.6; d > 1e-12 || d < -1e-12 {
		t.Fatalf("lab2's ratio %v is not against its own baseline (lab1's %v)", r2, r1)
	}
	// The machines' indexes side by side count only what both measured:
	// lab1's fio would otherwise weigh on its index alone.
	if got := a.sharedIndex(workload.RolePerformance)[0][1].Value; math.Abs(got-4110.0/4285.0) > 1e-9 {
		t.Fatalf("lab1's container index over the shared metrics = %v, want cpu's ratio %v", got, 4110.0/4285.0)
	}
}

func TestBuildAcrossRefusesMixedScenarios(t *testing.T) {
	cs := acrossFixture()
	cs[1].Run.ScenarioName = "network"
	_, err := BuildAcross(cs)
	if !errors.Is(err, ErrMixedScenarios) || !strings.Contains(err.Error(), "run 9: network") || !strings.Contains(err.Error(), "run 7: default") {
		t.Fatalf("err = %v, want ErrMixedScenarios naming each run's scenario", err)
	}
	if _, err := BuildAcross(cs[:1]); !errors.Is(err, ErrTooFewRuns) {
		t.Fatalf("one run: err = %v", err)
	}
}

// TestAcrossCountsMachinesNotKernels: a machine upgraded between two runs
// is one machine with two labels; two boxes of one name are two.
func TestAcrossCountsMachinesNotKernels(t *testing.T) {
	cs := acrossFixture()
	upgraded := cs[0]
	upgraded.Run.ID, upgraded.Run.Host.Kernel = 12, "6.12.0"
	box, twin := cs[0], cs[0]
	box.Run.Host.MachineID = "11aa"
	twin.Run.ID, twin.Run.Host.MachineID = 13, "77aa"
	for _, tc := range []struct {
		cs   []Comparison
		want string
	}{
		{[]Comparison{cs[0], upgraded}, "in 2 runs on one machine"},
		{[]Comparison{cs[0], upgraded, cs[1]}, "in 3 runs on 2 machines"},
		{[]Comparison{box, twin}, "on 2 machines"},
	} {
		a, err := BuildAcross(tc.cs)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.where(); got != tc.want {
			t.Errorf("%d runs: %q, want %q", len(a.Machines), got, tc.want)
		}
	}
}

// TestMachineLabelsTellOneMachineApart: two runs on one machine are named
// by their runs, others by their host alone.
func TestMachineLabelsTellOneMachineApart(t *testing.T) {
	cs := acrossFixture()
	third := cs[0]
	third.Run.ID = 12
	cs = append(cs, third)
	got := machineLabels(cs)
	want := []string{"lab1 (x86_64, 6.1.0) run 7", "lab2 (aarch64, 6.1.0-arm)", "lab1 (x86_64, 6.1.0) run 12"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("labels = %q, want %q", got, want)
		}
	}
	a, err := BuildAcross(cs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAcrossTable(&buf, a, TableOptions{Width: 100}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"scenario default in 3 runs on 2 machines", "\nlab1 (x86_64, 6.1.0) run 12 · baseline host",
		"\nlab2 (aarch64, 6.1.0-arm) · run 9 · baseline host", "lab1 (x86_64, 6.1.0) run 7   complete · Test CPU"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "run 7 · run 7") || strings.Contains(out, "run 7  run 7") {
		t.Errorf("a run named twice:\n%s", out)
	}
}

func TestAcrossTableGolden(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAcrossTable(&buf, a, TableOptions{Width: 100}); err != nil {
		t.Fatal(err)
	}
	golden(t, "across.golden", buf.Bytes())
	if strings.Contains(buf.String(), "lab1 (x86_64, 6.1.0)       host") {
		t.Error("the machines side by side are wider than 100 columns: they must be blocks")
	}
	for i, line := range strings.Split(buf.String(), "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns wide, past 100: %s", i+1, n, line)
		}
	}
}

// TestAcrossTableWide: with no width to keep to, the machines are column
// groups of one table, and colours mark the verdicts when asked for.
func TestAcrossTableWide(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAcrossTable(&buf, a, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "across-wide.golden", buf.Bytes())
	if strings.Count(buf.String(), "cpu events_per_sec ↑") != 1 {
		t.Errorf("a metric's row is not one line across the machines:\n%s", buf.String())
	}
	buf.Reset()
	WriteAcrossTable(&buf, a, TableOptions{Color: true})
	if !strings.Contains(buf.String(), ansiRed+"0.80 (2055 events/s)") {
		t.Errorf("lab2's worse container is not red:\n%s", buf.String())
	}
}

func TestAcrossCSVAndJSON(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAcrossCSV(&buf, a); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// lab1: cpu ×2 groups, fio ×2, memory ×1 (host only); lab2: cpu ×2, memory ×1.
	if len(recs) != 1+5+3 || strings.Join(recs[0], ",") != strings.Join(acrossCSVColumns, ",") {
		t.Fatalf("%d records, header %q", len(recs), recs[0])
	}
	for _, r := range recs[1:] {
		if r[0] == "lab2 (aarch64, 6.1.0-arm)" && r[2] == "container" && r[8] == "events_per_sec" && !strings.HasPrefix(r[15], "0.79") {
			t.Errorf("lab2's container ratio = %q, want 0.5×4110 / 0.6×4285", r[15])
		}
		if r[2] == "host" && r[15] != "1" {
			t.Errorf("a baseline's ratio = %q, want 1", r[15])
		}
	}
	buf.Reset()
	if err := WriteAcrossJSON(&buf, a); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Machines []struct {
			Label  string `json:"label"`
			RunID  int64  `json:"run_id"`
			Origin string `json:"origin"`
		} `json:"machines"`
		Rows []struct {
			Metric string   `json:"metric"`
			Cells  [][]Cell `json:"cells"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Machines) != 2 || got.Machines[1].RunID != 9 || got.Machines[1].Origin != "ssh://root@lab2:22" || got.Machines[0].Origin != "" ||
		len(got.Rows) != 3 || len(got.Rows[0].Cells) != 2 {
		t.Fatalf("JSON = %s", buf.String())
	}
}

func TestAcrossHTML(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAcrossHTML(&buf, a); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	assertSelfContained(t, page)
	// A plot per metric any machine measured with a baseline: cpu, fio, memory.
	if n := strings.Count(page, "normalised to the baseline"); n != 3 {
		t.Errorf("%d plots, want one per metric", n)
	}
	for _, want := range []string{"default on 2 machines", "lab2 (aarch64, 6.1.0-arm) · container (runc): 0.80",
		"lab1 (x86_64, 6.1.0) · run 7", "lab2 (aarch64, 6.1.0-arm) · run 9", "Neoverse-N1", `<rect class="worse"`,
		"over the 2 of 3 performance metrics every machine measured", "measured on ssh://root@lab2:22"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestAcrossHTMLRendersInABrowser: each machine's worse container bar and
// the baselines' bars must be on screen.
func TestAcrossHTMLRendersInABrowser(t *testing.T) {
	a, err := BuildAcross(acrossFixture())
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := WriteAcrossHTML(&page, a); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 2400)
	requireColours(t, img, map[string][3]uint32{"baseline bar": {0xc2, 0xc9, 0xd0}, "worse bar": {0xd0, 0x66, 0x4f}}, 600)
}
