package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
)

// machineRun is a complete run of a scenario text on a host, with its
// baseline's and a container's events/s.
type machineRun struct {
	text, host      string
	base, container float64
}

// storeMachineRuns records the runs, numbered from 1 in the order given,
// an hour apart, and returns the CLI with them in its database.
func storeMachineRuns(t *testing.T, runs ...machineRun) *cli {
	t.Helper()
	c := newCLI(t)
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	for i, r := range runs {
		name := strings.TrimPrefix(strings.SplitN(r.text, "\n", 2)[0], "name: ")
		at := start.Add(time.Duration(i) * time.Hour)
		id, err := st.CreateRun(ctx, &store.Run{ScenarioName: name, ScenarioText: []byte(r.text), Baseline: "host", Started: at,
			Host: hostinfo.Fingerprint{Hostname: r.host, Arch: "x86_64", Kernel: "6.1.0", CPUModel: "Test CPU"}})
		if err != nil {
			t.Fatal(err)
		}
		var samples []store.Sample
		for rep, noise := range []float64{1, 1.01, 0.99} {
			for group, v := range map[string]float64{"host": r.base, "container": r.container} {
				samples = append(samples, store.Sample{Guest: group, Group: group, Kind: group, WorkloadID: "cpu", Workload: "cpu",
					Repetition: rep, Metric: "events_per_sec", Unit: "events/s", Value: v * noise, Better: "higher", At: at})
			}
		}
		if err := st.AddSamples(ctx, id, samples); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, store.StatusComplete, "", at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestReportRefusesArgumentsThatDoNotGoTogether(t *testing.T) {
	c := storeMachineRuns(t, machineRun{quickText, "lab1", 1000, 900}, machineRun{quickText, "lab2", 500, 400},
		machineRun{otherText, "lab2", 500, 400})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--across", "1"}, "at least two runs"},
		{[]string{"--across", "1", "latest", "3"}, "the same run"},
		{[]string{"--across", "1", "3"}, "run 3: other"},
		{[]string{"--across", "--series", "1", "2"}, "give one of them"},
		{[]string{"--machine", "lab1", "1"}, "only --series"},
		{[]string{"1", "2"}, "--across"},
		{[]string{"--series", "quick", "other"}, "one scenario"},
		{[]string{"--series", "quick", "--format", "csv"}, "table, html or json"},
	} {
		_, stderr, code := c.run(append([]string{"report"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("report %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestReportAcross(t *testing.T) {
	c := storeMachineRuns(t, machineRun{quickText, "lab1", 1000, 900}, machineRun{quickText, "lab2", 500, 400},
		machineRun{quickEdited, "lab3", 800, 800})
	stdout, stderr, code := c.run("report", "--across", "1", "2")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"scenario quick on 2 machines", "lab1 (x86_64, 6.1.0)  ", "lab2 (x86_64, 6.1.0)  ",
		"0.90 (900.0 events/s)", "0.80 (400.0 events/s)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	_, stderr, code = c.run("report", "--across", "1", "2", "3")
	if code != 0 || !strings.Contains(stderr, "warning: scenario quick changed between run 1 and run 3") {
		t.Errorf("a changed scenario: exit %d, stderr %q; want a warning", code, stderr)
	}
	stdout, _, code = c.run("report", "--across", "1", "2", "--format", "csv")
	if code != 0 || !strings.HasPrefix(stdout, "machine,run_id,group,") || strings.Count(stdout, "\n") != 5 {
		t.Errorf("csv: exit %d:\n%s", code, stdout)
	}
	stdout, _, code = c.run("report", "--across", "1", "2", "--format", "json")
	var got struct {
		Machines []struct{ Label string } `json:"machines"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || len(got.Machines) != 2 {
		t.Errorf("json: exit %d, %v:\n%s", code, err, stdout)
	}
	stdout, _, code = c.run("report", "--across", "1", "2", "--format", "html")
	if code != 0 || !strings.Contains(stdout, "<svg") {
		t.Errorf("html: exit %d", code)
	}
}

func TestReportSeries(t *testing.T) {
	c := storeMachineRuns(t, machineRun{quickText, "lab1", 1000, 900}, machineRun{quickText, "lab2", 500, 400},
		machineRun{quickText, "lab1", 1000, 900}, machineRun{otherText, "lab1", 1000, 900})
	stdout, stderr, code := c.run("report", "--series", "quick", "--machine", "lab1")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"scenario quick on lab1 (x86_64, Test CPU) · 2 complete runs", "2026-11-01 08:00  1  ", "2026-11-01 10:00  3  "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("series lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "2026-11-01 09:00") {
		t.Errorf("lab2's run is in lab1's series:\n%s", stdout)
	}
	_, stderr, code = c.run("report", "--series", "quick", "--machine", "nowhere")
	if code != 1 || !strings.Contains(stderr, "no complete run on a machine named nowhere") ||
		!strings.Contains(stderr, "lab1 (x86_64, Test CPU); lab2 (x86_64, Test CPU)") {
		t.Errorf("an unknown machine: exit %d, stderr %q; want exit 1 naming the machines that ran it", code, stderr)
	}
	// This machine ran none of them.
	_, stderr, code = c.run("report", "--series", "quick")
	if code != 1 || !strings.Contains(stderr, "--machine") {
		t.Errorf("no run here: exit %d, stderr %q; want exit 1 pointing to --machine", code, stderr)
	}
	stdout, _, code = c.run("report", "--series", "quick", "--machine", "lab1", "--format", "html")
	if code != 0 || !strings.Contains(stdout, `<polyline class="series"`) {
		t.Errorf("html: exit %d", code)
	}
}

// TestMachineRunsRefusesAHostNameOfTwoMachines: two machines that share a
// host name are no one series.
func TestMachineRunsRefusesAHostNameOfTwoMachines(t *testing.T) {
	fp := func(cpu string) hostinfo.Fingerprint {
		return hostinfo.Fingerprint{Hostname: "lab", Arch: "x86_64", CPUModel: cpu}
	}
	runs := []store.Run{{ID: 1, Host: fp("A")}, {ID: 2, Host: fp("B")}, {ID: 3, Host: fp("A")}}
	if _, err := machineRuns(runs, "lab"); err == nil || !strings.Contains(err.Error(), "lab (x86_64, A); lab (x86_64, B)") {
		t.Fatalf("err = %v, want both machines named", err)
	}
	got, err := machineRuns(runs[:1], "lab")
	if err != nil || len(got) != 1 {
		t.Fatalf("one machine: %v, %v", got, err)
	}
	if _, err := machineRuns(runs, "elsewhere"); !errors.Is(err, errNoSeries) {
		t.Fatalf("no such machine: err = %v, want errNoSeries", err)
	}
}

// A machine is named the same way by every command that takes one: by
// its host name, or by the whole name their messages give it.
func TestMachineNamesAreOneForm(t *testing.T) {
	c := storeMachineRuns(t, machineRun{quickText, "lab1", 1000, 900}, machineRun{quickText, "lab1", 1000, 900})
	const whole = "lab1 (x86_64, Test CPU)"
	for _, name := range []string{"lab1", whole} {
		if stdout, stderr, code := c.run("report", "--series", "quick", "--machine", name); code != 0 || !strings.Contains(stdout, "scenario quick on "+whole) {
			t.Errorf("report --series --machine %q: exit %d, stderr %q", name, code, stderr)
		}
		if _, stderr, code := c.run("baseline", "set", "1"); code != 0 {
			t.Fatalf("baseline set: exit %d, stderr %q", code, stderr)
		}
		if _, stderr, code := c.run("baseline", "unset", "quick", "--machine", name); code != 0 || !strings.Contains(stderr, "no baseline on "+whole+" any more") {
			t.Errorf("baseline unset --machine %q: exit %d, stderr %q", name, code, stderr)
		}
	}
	if _, stderr, code := c.run("report", "--series", "quick", "--machine", "lab"); code != 1 || !strings.Contains(stderr, whole) {
		t.Errorf("a prefix of the host name: exit %d, stderr %q; want refused, listing %s", code, stderr, whole)
	}
}
