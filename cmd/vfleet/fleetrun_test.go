package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// One small study with every fleet feature at once: a sweep over two
// sizes, each step alone and together, quiet and under CPU noise on the
// host, containers spread over the CPUs the noise leaves.
const fleetStudy = `name: fleet-study
repetitions: 1
warmup: 0
duration: 1s
fleet:
  scale: [1, 2]
  idle: 500ms
  concurrency: [alone, together]
  pinning: spread
noise: {profiles: [none, cpu]}
guests:
  - {name: host, kind: host}
  - {name: c, kind: container, runtime: runc}
workloads:
  - workload: cpu
`

func TestFleetStudyEndToEnd(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(fleetStudy), "--html", "-")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"cpu [fleet_size=2 mode=together noise=cpu] total.events_per_sec",
		"launch [fleet_size=2] launch.all_ready_s",
		"interference:",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "aggressors on CPUs 0") || strings.Contains(stdout, "failure") {
		t.Errorf("want the placement announced and no failure:\n%s\n%s", stderr, stdout)
	}
	out, _, code := c.run("report", "latest", "--format", "json")
	if code != 0 {
		t.Fatal("report failed")
	}
	var rep struct {
		Run struct {
			Guests map[string]struct {
				Details map[string]string `json:"details"`
			} `json:"guests"`
		} `json:"run"`
		Scaling []struct {
			Param, Metric string
		} `json:"scaling"`
		Interference *struct{ Rows []json.RawMessage } `json:"interference"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Run.Guests["c-1"].Details; d["pinning"] != "spread" || d["pinned_cpus"] != "1" {
		t.Errorf("c-1 placement = %v, want spread onto CPU 1, the one noise leaves", d)
	}
	if d := rep.Run.Guests["noise"].Details; d["pinned_cpus"] != "0" {
		t.Errorf("noise placement = %v, want CPU 0", d)
	}
	curves := map[string]bool{}
	for _, s := range rep.Scaling {
		if s.Param == "fleet_size" {
			curves[s.Metric] = true
		}
	}
	if !curves["events_per_sec"] || !curves["total.events_per_sec"] {
		t.Errorf("scaling curves over fleet_size: %v, want per guest and total", curves)
	}
	if rep.Interference == nil || len(rep.Interference.Rows) == 0 {
		t.Error("no interference matrix in the JSON")
	}
}

// Ctrl-C while a large fleet is starting must take down every guest that
// started and every one still starting.
func TestInterruptDuringFleetLaunchLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	scenario := c.scenario(`name: big
guests:
  - {name: host, kind: host}
  - {name: c, kind: container, runtime: runc, count: 60}
workloads:
  - workload: cpu
`)
	cmd, _ := startRun(t, c, scenario, "[10/61]")
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted launch exit: %v, want %d", err, exitInterrupted)
	}
	out, _, _ := c.run("runs")
	if !strings.Contains(out, "incomplete") {
		t.Errorf("run not kept as incomplete:\n%s", out)
	}
}
