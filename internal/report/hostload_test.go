package report

import (
	"bytes"
	"encoding/json"
	"html"
	"math"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
)

// step is a 1 s step on 2 CPUs (200 ticks) whose tasks ran taskTicks,
// the run's own for ownMS of them.
func step(taskTicks, stealTicks, ownMS int64) store.StepLoad {
	return store.StepLoad{WorkloadID: "cpu", CPUs: 2, WallNS: 1e9, TotalTicks: 200, TaskTicks: taskTicks, StealTicks: stealTicks, OwnNS: ownMS * 1e6}
}

func TestSummarizeLoad(t *testing.T) {
	for _, tc := range []struct {
		name       string
		loads      []store.StepLoad
		busy       int
		other      float64 // the most of one step, in cores
		stealShare float64
	}{
		// The run used a core and a half of the tasks' 1.6: 0.1 core else.
		{"quiet", []store.StepLoad{step(160, 0, 1500), step(150, 0, 1500)}, 0, 0.1, 0},
		// Another process took 0.3 of a core in the second step.
		{"other processes", []store.StepLoad{step(160, 0, 1500), step(180, 0, 1500)}, 1, 0.3, 0},
		{"steal", []store.StepLoad{step(100, 6, 1000)}, 1, 0, 0.03},
		// The run's own time read beyond the ticks' is no negative load;
		// a step too short for a tick says nothing.
		{"rounding", []store.StepLoad{step(100, 0, 1020), {WorkloadID: "cpu", CPUs: 2}}, 0, 0, 0},
	} {
		h := SummarizeLoad(tc.loads)
		if h.Steps != len(tc.loads) || h.BusySteps != tc.busy || h.Busy != (tc.busy > 0) ||
			math.Abs(h.OtherCoresMax-tc.other) > 1e-9 || math.Abs(h.StealMax-tc.stealShare) > 1e-9 {
			t.Errorf("%s: %+v; want %d busy, other up to %v, steal up to %v", tc.name, h, tc.busy, tc.other, tc.stealShare)
		}
	}
}

// A busy host is said in the table, the page and the JSON; a quiet one
// only in the page's environment and the JSON; a run whose load was not
// read says that, never that it was quiet.
func TestReportsSayTheHostWasBusy(t *testing.T) {
	run, samples, failures := fixture()
	for _, tc := range []struct {
		name      string
		loads     []store.StepLoad
		table     string
		htmlEnv   string
		jsonSteps int
	}{
		{"busy", []store.StepLoad{step(160, 0, 1500), step(200, 0, 1500)}, "the host was busy during 1 of 2 steps: other processes used up to 0.50 cores",
			"busy during 1 of 2 steps", 2},
		{"quiet", []store.StepLoad{step(160, 0, 1500)}, "", "quiet: other processes up to 0.10 cores", 1},
		{"not read", nil, "the host's load during the steps was not read", "not read", 0},
	} {
		c := Build(run, samples, failures)
		load := SummarizeLoad(tc.loads)
		c.Load = &load
		var table, page, js bytes.Buffer
		if err := WriteTable(&table, c, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(&page, c, samples); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&js, c, samples); err != nil {
			t.Fatal(err)
		}
		if tc.table != "" && !strings.Contains(table.String(), "note: "+tc.table) {
			t.Errorf("%s: the table does not say %q:\n%s", tc.name, tc.table, table.String())
		}
		if tc.table == "" && (strings.Contains(table.String(), "busy") || strings.Contains(table.String(), "not read")) {
			t.Errorf("%s: the table speaks of the host's load:\n%s", tc.name, table.String())
		}
		if !strings.Contains(page.String(), tc.htmlEnv) || !strings.Contains(page.String(), html.EscapeString(tc.table)) {
			t.Errorf("%s: the page does not say %q", tc.name, tc.htmlEnv)
		}
		var back struct {
			Run struct {
				HostLoad *HostLoad `json:"host_load"`
			} `json:"run"`
		}
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Run.HostLoad == nil || back.Run.HostLoad.Steps != tc.jsonSteps || back.Run.HostLoad.Busy != load.Busy {
			t.Errorf("%s: JSON run.host_load %+v, %v; want %+v", tc.name, back.Run.HostLoad, err, load)
		}
	}
}

// A comparison names the side whose host was busy, in its table, page
// and JSON.
func TestComparisonSaysWhichSideWasBusy(t *testing.T) {
	run, samples, _ := fixture()
	quiet, busy := SummarizeLoad([]store.StepLoad{step(160, 0, 1500)}), SummarizeLoad([]store.StepLoad{step(200, 0, 1500)})
	c := CompareRuns(run, samples, run, samples, DefaultCompareOptions)
	c.Loads = [2]*HostLoad{&quiet, &busy}
	var table, page, js bytes.Buffer
	if err := WriteABTable(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteABHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteABJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	want := "B (run 7): the host was busy during 1 of 1 steps"
	if !strings.Contains(table.String(), "note: "+want) || strings.Contains(table.String(), "A (run 7)") || !strings.Contains(page.String(), want) {
		t.Errorf("the comparison does not say B's host was busy (and only B's):\n%s", table.String())
	}
	var back struct {
		A *HostLoad `json:"host_load_a"`
		B *HostLoad `json:"host_load_b"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.A == nil || back.A.Busy || back.B == nil || !back.B.Busy {
		t.Errorf("JSON host loads %+v, %+v, %v", back.A, back.B, err)
	}
}
