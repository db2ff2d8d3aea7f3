package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/testutil"
)

// vmNetScenario puts one emulated VM on every path that takes VMs and
// connections from the peer, next to the host side's direct link, and
// measures round trips briefly from the peer's client to a server in the
// VM beside a bulk stream, on the VM's one agent connection: a connection
// the peer opens carries traffic both ways. (A VM's own connection out to
// the peer on every path is internal/guest/qemu's TestMicroVMOnEveryVMPath;
// each round trip step costs sockperf's 2 s warm-up pause here.) A cloned
// VM on the routed path goes with them.
func vmNetScenario() (scenario string, groups []string) {
	var b strings.Builder
	b.WriteString(`name: vmnet
repetitions: 1
warmup: 0
duration: 1s
network:
  pin: {client: 0, server: 0}
guests:
  - {name: host, kind: host}
`)
	for _, p := range netpath.GuestPaths() {
		// rr-from-peer needs the peer to reach the VM; internal/guest/qemu
		// checks the VMs of paths that do not let it. A lent PCI device is
		// the host's to give (netpath's TestPassthroughDevice).
		if netpath.CheckVMPath(p) != nil || netpath.CheckInbound(p) != nil || netpath.VMDeviceOf(p) == netpath.VMVFIO {
			continue
		}
		g := "vm-" + string(p)
		groups = append(groups, g)
		fmt.Fprintf(&b, "  - {name: %s, kind: vm, runtime: microvm, accel: tcg, network: %s}\n", g, p)
	}
	// A clone resumes a template that booted with no address and a NIC
	// of the template's MAC: it must take its own on the path and route.
	groups = append(groups, "clone-routed")
	b.WriteString("  - {name: clone-routed, kind: vm, runtime: microvm, accel: tcg, network: routed, launch: clone}\n")
	b.WriteString(`workloads:
  - {id: rr-from-peer, workload: net-latency, params: {proto: tcp, client: peer, background_streams: 1}}
`)
	return b.String(), groups
}

// TestVMsOnTheNetworkPaths runs a network workload in a VM on every path
// that takes VMs, both ways: each VM must reach the peer and be reached
// from it (samples stored, no failures), its link must be in its stored
// record, and nothing may be left behind. A path that starts taking VMs
// is in it by registering.
func TestVMsOnTheNetworkPaths(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	scenario, vms := vmNetScenario()
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(scenario))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Other runs share the state directory: the run's own is below its key.
	for _, p := range processesRootedIn(filepath.Join(testutil.StateRoot(), "runs", c.latestRunKey())) {
		t.Errorf("process left running in a run's guest: %s", p)
	}
	stdout, _, code = c.run("report", "latest", "--format", "json")
	var rep struct {
		Samples []struct {
			Group, Metric string
			WorkloadID    string `json:"workload_id"`
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
	ownCPU := map[string]bool{}
	for _, s := range rep.Samples {
		if s.Metric == "net.rtt_us" && s.Value > 0 {
			rtts[s.Group+" "+s.WorkloadID]++
		}
		if s.Metric == "net.cpu.guest_user_cores" {
			emulatorUser[s.Group] = max(emulatorUser[s.Group], s.Value)
		}
		if s.Metric == "net.cpu.in_guest_cores" && s.Value > 0 {
			ownCPU[s.Group] = true
		}
		if strings.HasPrefix(s.Group, "vm-") && s.Params["path"] != strings.TrimPrefix(s.Group, "vm-") {
			t.Errorf("%s %s stored on path %q", s.Group, s.Metric, s.Params["path"])
		}
	}
	for _, g := range append([]string{"host"}, vms...) {
		if rtts[g+" rr-from-peer"] == 0 {
			t.Errorf("group %s has no round trip times (samples per group and workload: %v)", g, rtts)
		}
	}
	for _, g := range vms {
		d := rep.Run.Guests[g].Details
		if d["net.tap"] == "" || d["net.addr"] == "" || d["net.peer"] == "" || d["net.vhost"] == "" {
			t.Errorf("%s record lacks its link: %v", g, d)
		}
		// The device and offloads the path gives a VM; internal/guest/qemu
		// checks the paths this test does not boot a VM on.
		if p := netpath.Path(strings.TrimPrefix(g, "vm-")); g != "clone-routed" {
			if want := netpath.VMDeviceOf(p).String(); d["net.device"] != want {
				t.Errorf("%s record says device %q, want %q", g, d["net.device"], want)
			}
			if off := netpath.VMOffloadsOffOf(p) != ""; off != strings.Contains(d["net.offload"], "csum=off") {
				t.Errorf("%s record says offloads %q; want them off: %v", g, d["net.offload"], off)
			}
		}
		// Under TCG the emulator's user time is the guest running the
		// server: it must show in the CPU split.
		if emulatorUser[g] <= 0 {
			t.Errorf("%s: the emulator's user time is not in the CPU split (%v)", g, emulatorUser)
		}
		if !ownCPU[g] {
			t.Errorf("%s: no busy cores by the VM's own kernel", g)
		}
	}
	t.Logf("round trip samples per group: %v", rtts)
}
