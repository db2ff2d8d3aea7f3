package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/fleet"
	"github.com/vfleet/vfleet/internal/testutil"
)

// fleetScenario is a baseline and two containers; its workload is never
// run by a fleet, but a scenario must name one.
const fleetScenario = `name: fleetquick
guests:
  - {name: host, kind: host}
  - {name: c, kind: container, runtime: runc, count: 2}
workloads:
  - workload: cpu
`

// netFleetScenario adds the run's network: a peer, and a container on the
// bridge path.
const netFleetScenario = `name: fleetnet
network: {path: bridge}
guests:
  - {name: host, kind: host}
  - {name: c, kind: container, runtime: runc}
workloads:
  - workload: cpu
`

// upFleet runs `fleet up` to its end (the CLI exits) and returns the
// fleet's state file. The fleet is taken down when the test ends, whatever
// happened to it.
func upFleet(t *testing.T, c *cli, scenarioText, name string) fleet.State {
	t.Helper()
	fleets := fleet.At(testutil.StateRoot(), io.Discard)
	t.Cleanup(func() {
		if _, err := fleets.Read(name); err == nil {
			c.run("fleet", "down", name)
		}
	})
	stdout, stderr, code := c.run("fleet", "up", c.scenario(scenarioText), "--name", name)
	if code != 0 || !strings.Contains(stdout, "fleet "+name+" is up") {
		t.Fatalf("fleet up: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := fleets.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleetProcesses lists the fleet's guest processes still running.
func fleetProcesses(s fleet.State) []int {
	var out []int
	for _, g := range s.Guests {
		for _, pid := range g.PIDs {
			if fleet.ProcessRunning(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func TestFleetOutlivesTheCLIAndDownRemovesEverything(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	// A cleanup, so that it runs after upFleet's has taken the fleet down.
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	c := newCLI(t)
	s := upFleet(t, c, fleetScenario, "itest-fleet")

	if len(s.Guests) != 3 || len(fleetProcesses(s)) != 3 {
		t.Fatalf("after up exited, want 3 guests with a running process each: %+v (running: %v)", s.Guests, fleetProcesses(s))
	}
	stdout, stderr, code := c.run("fleet", "status", "itest-fleet")
	if code != 0 || !strings.Contains(stdout, "3 of 3 agents answer") || strings.Contains(stdout, "DEAD") {
		t.Fatalf("fleet status: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The kernel's hostname, not the image's /etc/hostname: it shows the
	// command ran in that very container.
	stdout, stderr, code = c.run("fleet", "exec", "--fleet", "itest-fleet", "c-1", "--", "cat", "/proc/sys/kernel/hostname")
	if code != 0 || stdout != "c-1\n" {
		t.Fatalf("exec cat /proc/sys/kernel/hostname: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// The one fleet up needs no --fleet; the command's flags are its own.
	stdout, stderr, code = c.run("fleet", "exec", "c-0", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || stdout != "out\n" || stderr != "err\n" {
		t.Fatalf("failing command: exit %d, stdout %q, stderr %q; want 3, out, err", code, stdout, stderr)
	}
	if _, stderr, code = c.run("fleet", "exec", "host", "--", "true"); code != 0 {
		t.Fatalf("exec in the baseline: exit %d: %s", code, stderr)
	}
	_, stderr, code = c.run("fleet", "exec", "nope", "--", "true")
	if code != 1 || !strings.Contains(stderr, `no guest "nope" (guests: host, c-0, c-1)`) {
		t.Fatalf("unknown guest: exit %d: %s", code, stderr)
	}

	stdout, stderr, code = c.run("fleet", "down", "itest-fleet")
	if code != 0 || !strings.Contains(stdout, "removed container vfleet-") || !strings.Contains(stdout, "fleet itest-fleet is down") {
		t.Fatalf("fleet down: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if running := fleetProcesses(s); len(running) > 0 {
		t.Errorf("guest processes still running after down: %v", running)
	}
	runDir := filepath.Join(testutil.StateRoot(), "runs", s.RunKey)
	if left := processesRootedIn(runDir); len(left) > 0 {
		t.Errorf("processes still rooted in the fleet's state after down: %v", left)
	}
	for _, p := range []string{runDir, filepath.Join(testutil.StateRoot(), "ledger", s.RunKey), fleet.At(testutil.StateRoot(), io.Discard).Path(s.Name)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after down (%v)", p, err)
		}
	}
	if stdout, _, _ = c.run("runs"); !strings.Contains(stdout, "fleetquick") || !strings.Contains(stdout, "complete") {
		t.Errorf("the fleet's run is not marked complete:\n%s", stdout)
	}

	_, stderr, code = c.run("fleet", "down", "itest-fleet")
	if code != 1 || !strings.Contains(stderr, `no such fleet "itest-fleet"`) {
		t.Errorf("second down: exit %d: %s", code, stderr)
	}
}

func TestCleanRemovesANetworkedFleet(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	// A cleanup, so that it runs after upFleet's has taken the fleet down.
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	c := newCLI(t)
	s := upFleet(t, c, netFleetScenario, "itest-netfleet")

	stdout, stderr, code := c.run("fleet", "status")
	if code != 0 || !strings.Contains(stdout, "2 of 2 agents answer") || !strings.Contains(stdout, "peer") {
		t.Fatalf("fleet status: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = c.run("fleet", "exec", "c", "--", "cat", "/sys/class/net/eth0/operstate")
	if code != 0 || stdout != "up\n" {
		t.Fatalf("the container's link on the bridge path: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	stdout, stderr, code = c.run("clean")
	if code != 0 || !strings.Contains(stdout, "removed container vfleet-") || !strings.Contains(stdout, "removed netns") {
		t.Fatalf("clean: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if running := fleetProcesses(s); len(running) > 0 {
		t.Errorf("guest processes still running after clean: %v", running)
	}
	stdout, stderr, code = c.run("fleet", "status", "itest-netfleet")
	if code != 0 || !strings.Contains(stdout, "fleet itest-netfleet is gone") {
		t.Fatalf("status of a cleaned fleet: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(fleet.At(testutil.StateRoot(), io.Discard).Path(s.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cleaned fleet's state file is still there (%v)", err)
	}
	if stdout, _, _ = c.run("fleet", "status"); !strings.Contains(stdout, "no fleet is up") {
		t.Errorf("status after the fleet was forgotten:\n%s", stdout)
	}
}
