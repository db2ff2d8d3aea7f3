package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// vmNetScenario puts one emulated VM on each path VMs take, next to the
// host side's direct link, and measures round trips to the peer briefly.
const vmNetScenario = `name: vmnet
repetitions: 1
warmup: 0
duration: 1s
network:
  pin: {client: 0, server: 0}
guests:
  - {name: host, kind: host}
  - {name: vm-routed, kind: vm, runtime: microvm, accel: tcg, network: routed}
  - {name: vm-bridge, kind: vm, runtime: microvm, accel: tcg, network: bridge}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`

// TestVMsOnTheNetworkPaths runs a network workload in VMs on tap devices:
// each VM must reach the peer (samples stored, no failures), its link must
// be in its stored record, and nothing may be left behind.
func TestVMsOnTheNetworkPaths(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	// Other runs may share the state directory: only processes that were
	// not there before count.
	runs := filepath.Join(testutil.StateRoot(), "runs")
	already := map[string]bool{}
	for _, p := range processesRootedIn(runs) {
		already[p] = true
	}
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(vmNetScenario))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, p := range processesRootedIn(runs) {
		if !already[p] {
			t.Errorf("process left running in a run's guest: %s", p)
		}
	}
	stdout, _, code = c.run("report", "latest", "--format", "json")
	var rep struct {
		Samples []struct {
			Group, Metric string
			Value         float64
			Params        map[string]string
		} `json:"samples"`
		Failures []struct{ Guest, Error, Stderr string } `json:"failures"`
		Run      struct {
			Guests map[string]struct {
				Details map[string]string `json:"details"`
			} `json:"guests"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("report json: %v (exit %d)\n%s", err, code, stdout)
	}
	for _, f := range rep.Failures {
		t.Errorf("failure on %s: %s\n%s", f.Guest, f.Error, f.Stderr)
	}
	rtts := map[string]int{}
	emulatorUser := map[string]float64{}
	for _, s := range rep.Samples {
		if s.Metric == "net.rtt_us" && s.Value > 0 {
			rtts[s.Group]++
		}
		if s.Metric == "net.cpu.guest_user_cores" {
			emulatorUser[s.Group] = max(emulatorUser[s.Group], s.Value)
		}
		if strings.HasPrefix(s.Group, "vm-") && s.Params["path"] != strings.TrimPrefix(s.Group, "vm-") {
			t.Errorf("%s %s stored on path %q", s.Group, s.Metric, s.Params["path"])
		}
	}
	for _, g := range []string{"host", "vm-routed", "vm-bridge"} {
		if rtts[g] == 0 {
			t.Errorf("group %s has no round trip times (samples per group: %v)", g, rtts)
		}
	}
	for _, g := range []string{"vm-routed", "vm-bridge"} {
		d := rep.Run.Guests[g].Details
		if d["net.tap"] == "" || d["net.addr"] == "" || d["net.peer"] == "" || d["net.vhost"] == "" {
			t.Errorf("%s record lacks its link: %v", g, d)
		}
		// Under TCG the emulator's user time is the guest running the
		// client: it must show in the CPU split.
		if emulatorUser[g] <= 0 {
			t.Errorf("%s: the emulator's user time is not in the CPU split (%v)", g, emulatorUser)
		}
	}
	t.Logf("round trip samples per group: %v", rtts)
}
