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
// side's direct link, and runs both network workloads briefly, and round
// trips the other way, the peer's client to a server in the guest, beside
// a bulk stream.
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
  - {id: rr, workload: net-latency, params: {proto: tcp}}
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
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(netScenario))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left := processesRootedIn(filepath.Join(testutil.StateRoot(), "runs")); len(left) > 0 {
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
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("report json: %v (exit %d)\n%s", err, code, stdout)
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
		for _, m := range []string{"rr net.rtt_us", "rr net.cpu_us_per_transaction", "rr net.host_busy_cores", "rr net.cpu.kernel_cores",
			"rr net.cpu.other_cores", "rr net.cpu.kernel_us_per_transaction", "bulk net.cpu.kernel_ms_per_gbit", "rr-from-peer net.rtt_us"} {
			if !metrics[g][m] {
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
	cmd, _ := startRun(t, c, c.scenario(netScenario), "rr on bridge")
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
