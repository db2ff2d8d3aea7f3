package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// netScenario puts a container on every data path, next to the host
// side's direct link, and runs both network workloads briefly: a bulk
// stream from the guest to the peer, and round trips the other way, the
// peer's client to a server in the guest, beside a bulk stream. (A round
// trip from the guest as well cost 24 s, sockperf's 2 s pause after its
// warm-up per step, for directions these two cover.)
const netScenario = `name: netquick
repetitions: 1
warmup: 0
duration: 1s
network:
  pin: {client: 0, server: 0}
guests:
  - {name: host, kind: host}
  - {name: bridge, kind: container, network: bridge}
  - {name: routed, kind: container, network: routed}
  - {name: macvlan, kind: container, network: macvlan}
  - {name: xdp, kind: container, network: xdp}
  - {name: tc, kind: container, network: tc}
  - {name: veth, kind: container, network: veth}
  - {name: ovs, kind: container, network: ovs}
workloads:
  - {id: bulk, workload: net-throughput, params: {proto: tcp, msg_size: 16384}}
  - {id: rr-from-peer, workload: net-latency, params: {proto: tcp, client: peer, background_streams: 1}}
`

// processesRootedIn lists processes whose root directory lies below dir:
// the peer's servers and any agent a run failed to stop. They are not this
// test's children, so the generic leak check cannot see them.
func processesRootedIn(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		root, err := os.Readlink(filepath.Join("/proc", e.Name(), "root"))
		if err == nil && strings.HasPrefix(root, dir) {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			out = append(out, e.Name()+" "+strings.TrimSpace(string(comm)))
		}
	}
	return out
}

func TestNetworkRunOverEveryPath(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(netScenario))
	if code != 0 && code != exitStepsFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left := processesRootedIn(filepath.Join(testutil.StateRoot(), "runs", c.latestRunKey())); len(left) > 0 {
		t.Errorf("processes left running in a run's guests: %v", left)
	}
	stdout, _, code = c.run("report", "latest", "--format", "json")
	var rep struct {
		Samples []struct {
			Group, Metric string
			WorkloadID    string `json:"workload_id"`
			Params        map[string]string
		} `json:"samples"`
		Run struct {
			Guests map[string]struct {
				Details map[string]string `json:"details"`
			} `json:"guests"`
		} `json:"run"`
		Failures []struct {
			Group, Error string
			WorkloadID   string `json:"workload_id"`
		} `json:"failures"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("report json: %v (exit %d)\n%s", err, code, stdout)
	}
	// Open vSwitch's userspace datapath drops frames while its one
	// forwarding thread waits for a CPU, and a round trip beside a bulk
	// stream can then stall through the whole of a 1 s run
	// (docs/network.md): that failure, and no other, is the path's own.
	ovsStalled := false
	for _, f := range rep.Failures {
		if f.Group == "ovs" && f.WorkloadID == "rr-from-peer" && strings.Contains(f.Error, "sockperf counted no round trip") {
			t.Logf("ovs stalled: %s", f.Error)
			ovsStalled = true
			continue
		}
		t.Errorf("step failed: %s on %s: %s", f.WorkloadID, f.Group, f.Error)
	}
	metrics := map[string]map[string]bool{}
	for _, s := range rep.Samples {
		if metrics[s.Group] == nil {
			metrics[s.Group] = map[string]bool{}
		}
		metrics[s.Group][s.WorkloadID+" "+s.Metric] = true
		if s.Params["client_cpu"] != "0" || s.Params["server_cpu"] != "0" || s.Params["path"] == "" {
			t.Errorf("%s %s: placement not stored: %v", s.Group, s.Metric, s.Params)
		}
	}
	for _, g := range []string{"host", "bridge", "routed", "macvlan", "xdp", "tc", "veth", "ovs"} {
		for _, m := range []string{"rr-from-peer net.rtt_us", "rr-from-peer net.cpu_us_per_transaction", "rr-from-peer net.host_busy_cores", "rr-from-peer net.cpu.kernel_cores",
			"rr-from-peer net.cpu.other_cores", "rr-from-peer net.cpu.kernel_us_per_transaction", "bulk net.cpu.kernel_ms_per_gbit"} {
			if !metrics[g][m] && !(g == "ovs" && ovsStalled && strings.HasPrefix(m, "rr-from-peer ")) {
				t.Errorf("group %s has no %s (has %v)", g, m, metrics[g])
			}
		}
	}
	peer := rep.Run.Guests["peer"].Details
	for _, p := range []string{"xdp", "tc"} {
		counters := peer["path."+p+".counters"]
		if !strings.Contains(counters, "redirected=") || strings.Contains(counters, "redirected=0 ") {
			t.Errorf("%s fast path did not redirect: %q", p, counters)
		}
	}
}

func TestNetworkRunInterruptedLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	cmd, _ := startRun(t, c, c.scenario(netScenario), "bulk on bridge")
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err == nil {
		t.Fatal("an interrupted run exited 0")
	} else if _, ok := err.(*exec.ExitError); !ok {
		t.Fatal(err)
	}
	if left := processesRootedIn(filepath.Join(testutil.StateRoot(), "runs")); len(left) > 0 {
		t.Errorf("processes left running after the interrupt: %v", left)
	}
}

// A user's networked program runs as net-command: its own server on the
// peer, commands on the peer before and after each measurement, and its
// client in the guest, both ways round; a failing pre command fails its
// step, naming it.
func TestNetCommandEndToEnd(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	iperf := `
      server: [iperf3, -s, -p, "{port}"]
      pre: [touch, "measuring-{port}"]
      post: [rm, "measuring-{port}"]
      metrics:
        - {name: received_bps, unit: bit/s, better: higher, json: $.end.sum_received.bits_per_second}`
	stdout, stderr, code := c.run("run", c.scenario(`name: net-command
repetitions: 2
warmup: 0
duration: 1s
network: {path: bridge}
guests:
  - {name: host, kind: host}
  - {name: c, kind: container}
workloads:
  - id: up
    workload: net-command
    params:
      argv: [iperf3, -c, "{peer}", -p, "{port}", -t, "{duration}", -J]`+iperf+`
  - id: down
    workload: net-command
    params:
      client: peer
      argv: [iperf3, -c, "{peer}", -p, "{port}", -t, "{duration}", -J, -R]`+iperf+`
  - id: refused
    workload: net-command
    params:
      argv: [iperf3, -c, "{peer}", -p, "{port}", -t, "{duration}", -J]
      pre: ["false"]
      metrics:
        - {name: received_bps, unit: bit/s, better: higher, json: $.end.sum_received.bits_per_second}
`), "--html", "-")
	if code != exitStepsFailed {
		t.Fatalf("exit %d, want %d (the refused entry fails):\n%s\n%s", code, exitStepsFailed, stdout, stderr)
	}
	if !strings.Contains(stderr, "pre command false on the peer") {
		t.Errorf("the failing pre command is not named:\n%s", stderr)
	}
	got := map[string]int{}
	for _, s := range c.latestSamples() {
		if s.Value > 0 {
			got[s.Group+" "+s.WorkloadID+" "+s.Metric]++
		}
	}
	for _, key := range []string{"host up received_bps", "c up received_bps", "host down received_bps", "c down received_bps"} {
		if got[key] != 2 {
			t.Errorf("%s: %d samples, want 2 (%v)", key, got[key], got)
		}
	}
	if got["c refused received_bps"] != 0 {
		t.Errorf("a step whose pre command failed was measured")
	}
}
