package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/scenarios"
)

// doctor --peer checks a remote machine, starting nothing there: every
// step up to its work directory, and the network workloads' programs,
// each there with its version or missing with its package.
func TestDoctorPeer(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		stdout, stderr, code := c.run("doctor", "--peer", r.URL, "--peer-identity", r.Identity, "--peer-known-hosts", r.KnownHosts)
		t.Logf("vfleet doctor --peer (exit %d):\n%s", code, stdout)
		for _, want := range []string{
			`OK\s+peer reachable`, `OK\s+peer host key\s+` + regexp.QuoteMeta(ssh.FingerprintSHA256(r.HostKey)),
			`OK\s+peer authentication\s+as root`, `OK\s+peer architecture\s+` + image.HostArch, `OK\s+peer work directory\s+made and removed ` + r.WorkDir,
			// What a run needs there besides the workloads' programs.
			`OK\s+peer ip\s+/\S+ \(iproute2 \S+\)`, `OK\s+peer ethtool\s+/\S+ \(ethtool \S+\)`,
		} {
			if !regexp.MustCompile(want).MatchString(stdout) {
				t.Errorf("doctor --peer: no %q in\n%s", want, stdout)
			}
		}
		for _, prog := range []string{"iperf3", "sockperf"} {
			if !regexp.MustCompile(`(OK\s+peer ` + prog + `\s+/\S+ \(` + prog + ` \S+\))|(MISSING\s+peer ` + prog + `.*\n.*install the Debian package ` + prog + ` on the peer)`).MatchString(stdout) {
				t.Errorf("doctor --peer: %s neither there with its version nor missing with its package in\n%s", prog, stdout)
			}
		}
		if ready := !strings.Contains(stdout, "MISSING"); (code == 0) != ready {
			t.Errorf("doctor --peer: exit %d, stderr %q, with everything there: %v", code, stderr, ready)
		}
		if entries, _ := os.ReadDir(r.WorkDir); len(entries) > 0 {
			t.Errorf("doctor --peer left %v in the peer's work directory", entries)
		}
	})
	testutil.CheckLeaks(t, before)
}

// What a run started on a peer, recorded in its ledger, is what `vfleet
// clean` removes there: it reconnects with the files the ledger names.
func TestCleanReachesThePeer(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		target, err := remote.ParseURL(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		m, err := remote.Dial(ctx, target, remote.Config{KnownHosts: r.KnownHosts, Identity: r.Identity})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		state := t.TempDir()
		led, err := ledger.Create(filepath.Join(state, "ledger"), "r1")
		if err != nil {
			t.Fatal(err)
		}
		defer led.Close()
		agentFor := func(arch string) (string, error) {
			return session.AgentBinary(filepath.Join(filepath.Dir(c.bin), "vfleet-agent"), arch)
		}
		if err := m.StartAgent(ctx, led, agentFor); err != nil {
			t.Fatal(err)
		}
		// The run's vfleet is this test, alive: --force cleans it all the same.
		stdout, stderr, code := c.run("--state-dir", state, "clean", "--force")
		if code != 0 || !strings.Contains(stdout, "removed "+remote.KindPeer+" "+r.URL) {
			t.Errorf("vfleet clean: exit %d, stdout %q, stderr %q; want the peer's agent removed", code, stdout, stderr)
		}
		if entries, _ := os.ReadDir(r.WorkDir); len(entries) > 0 {
			t.Errorf("vfleet clean left %v on the peer", entries)
		}
		if _, err := m.Agent(ctx); err == nil {
			t.Error("the peer's agent still answers after vfleet clean")
		}
	})
	testutil.CheckLeaks(t, before)
}

// labScenario runs the bare host and a container on the routed path,
// round trips and 16 KiB bulk, with the network section given.
func labScenario(reps int, duration, network string) string {
	return fmt.Sprintf(`name: lab
repetitions: %d
warmup: 0
duration: %s
network:
%s
guests:
  - {name: host, kind: host}
  - {name: routed, kind: container}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
  - {id: bulk, workload: net-throughput, params: {proto: tcp, msg_size: 16384}}
`, reps, duration, network)
}

// remoteNetwork is the network section of a run on the routed path over
// the remote machine r's dedicated NIC (or uplink), with r as the peer.
func remoteNetwork(r *testutil.Remote, uplink, identity, knownHosts string) string {
	return fmt.Sprintf(`  path: routed
  uplink: %s
  peer: %s
  peer_nic: %s
  peer_identity: %s
  peer_known_hosts: %s`, uplink, r.URL, r.NIC.PeerName, identity, knownHosts)
}

// remotePeerScenario is a short lab scenario against r.
func remotePeerScenario(r *testutil.Remote, uplink, identity, knownHosts string) string {
	return labScenario(1, "1s", remoteNetwork(r, uplink, identity, knownHosts))
}

// A run whose peer is another machine: the servers run there, over the
// dedicated NIC, the bare host measures the NIC itself as the floor, the
// peer's fingerprint is stored; and afterwards, as after a run that
// fails once the peer served it, an interrupt or a killed vfleet and
// `vfleet clean`, nothing of the run is left on the peer and both ends of
// the wire are as they were.
func TestRunAgainstARemotePeer(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	// The machine goes before the leak check looks.
	t.Run("peer", func(t *testing.T) { runAgainstARemotePeer(t, c) })
}

func runAgainstARemotePeer(t *testing.T, c *cli) {
	r := testutil.RemoteMachine(t)
	wire := takeWire(t, r)
	scenario := c.scenario(remotePeerScenario(r, r.NIC.Name, r.Identity, r.KnownHosts))

	t.Run("run", func(t *testing.T) {
		stdout, stderr, code := c.run("run", scenario, "--html", "-")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		stdout, _, code = c.run("report", "latest", "--format", "json")
		var rep struct {
			Samples []struct {
				Group, Metric string
				WorkloadID    string `json:"workload_id"`
			} `json:"samples"`
			Run struct {
				Host   hostinfo.Fingerprint `json:"host"`
				Guests map[string]struct {
					Kind    string            `json:"kind"`
					Details map[string]string `json:"details"`
				} `json:"guests"`
			} `json:"run"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
			t.Fatalf("report json: %v (exit %d)\n%s", err, code, stdout)
		}
		got := map[string]bool{}
		for _, s := range rep.Samples {
			got[s.Group+" "+s.WorkloadID+" "+s.Metric] = true
		}
		for _, want := range []string{"host rr net.rtt_us", "routed rr net.rtt_us", "host bulk net.throughput_bps", "routed bulk net.throughput_bps"} {
			if !got[want] {
				t.Errorf("no %s sample (have %v)", want, got)
			}
		}
		// The floor goes over the NIC to the peer's address on the wire.
		if floor, want := rep.Run.Guests["host"].Details["net.peer"], netpath.UplinkOf(netpath.Routed).Peer.Addr().String(); floor != want {
			t.Errorf("the bare host reached the peer at %q, want %s across the NIC", floor, want)
		}
		peer := rep.Run.Guests["peer"]
		if peer.Kind != runner.KindRemotePeer || peer.Details[store.DetailPeerURL] != r.URL {
			t.Errorf("peer record: kind %q, details %v", peer.Kind, peer.Details)
		}
		// Both ends of the wire are described.
		if nic := rep.Run.Host.NIC; nic == nil || nic.Name != r.NIC.Name || nic.Driver != "veth" {
			t.Errorf("the host's NIC is recorded as %+v, want %s (veth)", nic, r.NIC.Name)
		}
		var fp hostinfo.Fingerprint
		if err := json.Unmarshal([]byte(peer.Details[store.DetailPeerFingerprint]), &fp); err != nil || fp.NIC == nil || fp.NIC.Name != r.NIC.PeerName || fp.ToolVersions["sockperf"] == "" {
			t.Errorf("peer fingerprint %q: %v; want its NIC %s and sockperf's version", peer.Details[store.DetailPeerFingerprint], err, r.NIC.PeerName)
		}
		wire.check(t)
	})
	t.Run("interrupted", func(t *testing.T) {
		cmd, _ := startRun(t, c, scenario, "rr on host")
		// The servers, running for the run, listen on the wire's address
		// alone, not on the peer's management address or any other.
		listening := peerListening(t, r)
		wireAddr := netpath.UplinkOf(netpath.Routed).Peer.Addr().String()
		if len(listening) == 0 {
			t.Error("no server listens on the peer during the run")
		}
		for _, l := range listening {
			if _, addrPort, _ := strings.Cut(l, " "); !strings.HasPrefix(addrPort, wireAddr+":") {
				t.Errorf("a server on the peer listens on %s, not on the wire's %s alone", l, wireAddr)
			}
		}
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err == nil {
			t.Error("an interrupted run exited 0")
		}
		wire.check(t)
	})
	t.Run("killed then cleaned", func(t *testing.T) {
		cmd, _ := startRun(t, c, scenario, "rr on host")
		cmd.Process.Kill()
		cmd.Wait()
		if stdout, stderr, code := c.run("clean"); code != 0 || !strings.Contains(stdout, remote.KindPeerWire+" "+r.URL) {
			t.Errorf("vfleet clean: exit %d\n%s\n%s", code, stdout, stderr)
		}
		wire.check(t)
	})
	t.Run("audit of paths in turn", func(t *testing.T) {
		// Each path has guests of its own, so the audit alone goes
		// through every path, not the first only.
		jsonPath := filepath.Join(t.TempDir(), "audit.json")
		stdout, stderr, code := c.run("audit", c.scenario(fmt.Sprintf(`name: lab-audit
network:
%s
guests:
  - {name: host, kind: host}
  - {name: routed, kind: container}
  - {name: bridged, kind: container, network: bridge}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`, remoteNetwork(r, r.NIC.Name, r.Identity, r.KnownHosts))), "--json", jsonPath)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		audited := map[string]bool{}
		for _, g := range readAudit(t, jsonPath).Groups {
			audited[g.Group] = len(g.Findings) > 0
		}
		if !audited["routed"] || !audited["bridged"] {
			t.Errorf("audited %v, want both paths' containers", audited)
		}
		wire.check(t)
	})
	t.Run("failed", func(t *testing.T) {
		// A fleet launched group by group: the container measures against
		// the peer's servers, then the VM's QEMU refuses its kernel, and
		// all_or_nothing fails the run.
		dir := t.TempDir()
		disk, notAKernel := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "vmlinuz")
		if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(notAKernel, make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := c.run("run", c.scenario(fmt.Sprintf(`name: lab-failed
repetitions: 1
warmup: 0
duration: 1s
network:
%s
fleet: {scale: [1], groups: apart, concurrency: alone, all_or_nothing: true, idle: 500ms}
guests:
  - {name: host, kind: host}
  - {name: routed, kind: container}
  - {name: broken, kind: vm, runtime: microvm, accel: tcg, image: %s, kernel: %s}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`, remoteNetwork(r, r.NIC.Name, r.Identity, r.KnownHosts), disk, notAKernel)), "--html", "-")
		t.Logf("vfleet run (exit %d):\n%s", code, stderr)
		if code != exitFailed || !strings.Contains(stderr, "fleet.all_or_nothing: a guest failed to start") {
			t.Errorf("exit %d, want %d and the failed start named:\n%s\n%s", code, exitFailed, stdout, stderr)
		}
		if run := c.latestRun(); run.Status != store.StatusFailed || !strings.Contains(run.StatusReason, "fleet.all_or_nothing: a guest failed to start") {
			t.Errorf("stored as %s (%q), want %s naming the guest that did not start", run.Status, run.StatusReason, store.StatusFailed)
		}
		// What was measured before is kept, beside why the VM did not start.
		stdout, _, code = c.run("report", "latest", "--format", "json")
		var rep struct {
			Samples  []reportSample `json:"samples"`
			Failures []struct {
				Group      string `json:"group"`
				WorkloadID string `json:"workload_id"`
				Error      string `json:"error"`
			} `json:"failures"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
			t.Fatalf("report json: %v (exit %d)\n%s", err, code, stdout)
		}
		got := map[string]bool{}
		for _, s := range rep.Samples {
			got[s.Group+" "+s.WorkloadID+" "+s.Metric] = true
		}
		for _, want := range []string{"host rr net.rtt_us", "routed rr net.rtt_us"} {
			if !got[want] {
				t.Errorf("no %s sample kept (have %v)", want, got)
			}
		}
		if len(rep.Failures) != 1 || rep.Failures[0].Group != "broken" || rep.Failures[0].WorkloadID != "" || !strings.Contains(rep.Failures[0].Error, "qemu") {
			t.Errorf("failures %+v, want the start of broken's VM, refused by QEMU", rep.Failures)
		}
		wire.check(t)
	})
}

// The VM latency study over a dedicated NIC, small: a container and a
// microVM on each of two paths, which take the NIC in turn, measured from
// the remote peer (its connections carry traffic both ways; a guest's own
// connection to the remote peer's servers is TestRunAgainstARemotePeer's,
// and each round trip step costs sockperf's 2 s pause after its warm-up).
// The floor over the NIC leads the table;
// a VM's tap reaches the peer as a container's veth does, on the routed
// path and on a macvtap sitting on the NIC; the peer's record describes
// both paths' networks; and nothing is left on either end of the wire.
func TestVMAgainstARemotePeer(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		wire := takeWire(t, r)
		stdout, stderr, code := c.run("run", c.scenario(fmt.Sprintf(`name: lab-vm-netpath
repetitions: 1
warmup: 0
duration: 1s
baseline: host
network:
%s
guests:
  - {name: host, kind: host}
  - {name: vm-routed, kind: vm, runtime: microvm, accel: tcg, network: routed}
  - {name: ct-routed, kind: container, network: routed}
  - {name: vm-macvtap, kind: vm, runtime: microvm, accel: tcg, network: macvtap}
  - {name: ct-macvtap, kind: container, network: macvtap}
workloads:
  - {id: from-peer, workload: net-latency, params: {proto: tcp, msg_size: 64, client: peer}}
`, remoteNetwork(r, r.NIC.Name, r.Identity, r.KnownHosts))), "--html", "-")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stderr+stdout, "macvtap on "+r.NIC.Name+": building the network") {
			t.Errorf("no word of the second path taking the NIC:\n%s", stderr)
		}
		groups := []string{"host", "vm-routed", "ct-routed", "vm-macvtap", "ct-macvtap"}
		got := map[string]bool{}
		for _, s := range c.latestSamples() {
			got[s.Group+" "+s.WorkloadID+" "+s.Metric] = true
		}
		for _, g := range groups {
			if !got[g+" from-peer net.rtt_us"] {
				t.Errorf("no %s from-peer sample (have %v)", g, got)
			}
		}
		report, _, _ := c.run("report", "latest")
		if first := firstOf(report, groups); first != "host" {
			t.Errorf("the table starts with %q, want the floor (host):\n%s", first, report)
		}
		guests := c.latestGuests()
		if paths := guests["peer"]["paths"]; paths != "routed,macvtap" {
			t.Errorf("the peer's record has paths %q, want both in turn", paths)
		}
		for _, p := range []string{"routed", "macvtap"} {
			if guests["peer"]["path."+p+".host_side"] == "" {
				t.Errorf("the peer's record does not describe %s's host side: %v", p, guests["peer"])
			}
		}
		if floor := guests["host"]["net.peer"]; floor != netpath.UplinkOf(netpath.Routed).Peer.Addr().String() {
			t.Errorf("the floor reached the peer at %q, not across the NIC on the first path", floor)
		}
		if p := guests["vm-macvtap"]["net.path"]; p != "macvtap" {
			t.Errorf("vm-macvtap on %q", p)
		}
		wire.check(t)
	})
}

// TestLatencyStudyOverTheWire runs the built-in vm-netpath-latency, as
// it is, against the tests' remote machine across its NIC, and prints the
// study's table: the figures behind docs/network.md. Opt-in
// (VFLEET_LAB_STUDY=1): about half an hour here.
func TestLatencyStudyOverTheWire(t *testing.T) {
	if os.Getenv("VFLEET_LAB_STUDY") != "1" {
		t.Skip("a measurement: set VFLEET_LAB_STUDY=1 to run it")
	}
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	study, err := scenarios.Lookup("vm-netpath-latency")
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		wire := takeWire(t, r)
		// The study's own network section, with the lab's fields added.
		text := string(study)
		if !strings.Contains(text, "\nnetwork:\n") {
			t.Fatal("vm-netpath-latency has no network section to add the lab to")
		}
		text = strings.Replace(text, "\nnetwork:\n", "\nnetwork:\n"+remoteNetwork(r, r.NIC.Name, r.Identity, r.KnownHosts)+"\n", 1)
		stdout, stderr, code := c.run("run", c.scenario(text), "--html", "-")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		t.Log(stdout)
		wire.check(t)
	})
}

// firstOf is the name of names that text mentions first at the start of
// a line.
func firstOf(text string, names []string) string {
	for _, line := range strings.Split(text, "\n") {
		for _, n := range names {
			if strings.HasPrefix(strings.TrimSpace(line), n+" ") {
				return n
			}
		}
	}
	return ""
}

// A remote peer that cannot serve the run is refused before anything is
// built, saying why: an unknown host key, a key it does not accept, a NIC
// that carries the SSH session to it, a program missing there.
func TestRemotePeerRefused(t *testing.T) {
	testutil.RequiresRoot(t)
	c := newCLI(t)
	r := testutil.RemoteMachine(t)
	wire := takeWire(t, r)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, scenario string
		want           []string
	}{
		{"unknown host key", remotePeerScenario(r, r.NIC.Name, r.Identity, empty),
			[]string{"host key unknown", ssh.FingerprintSHA256(r.HostKey), "StrictHostKeyChecking=accept-new"}},
		{"wrong key", remotePeerScenario(r, r.NIC.Name, testutil.NewSSHKey(t), r.KnownHosts),
			[]string{"authentication refused", "authorized_keys"}},
		{"no such peer NIC", strings.Replace(remotePeerScenario(r, r.NIC.Name, r.Identity, r.KnownHosts), "peer_nic: "+r.NIC.PeerName, "peer_nic: nope0", 1),
			[]string{"the peer's NIC cannot be wired for the run: nope0 on " + r.URL + ": no interface nope0 there"}},
		{"NIC carries the session", remotePeerScenario(r, r.Management.Name, r.Identity, r.KnownHosts),
			[]string{"NIC refused as the data paths' uplink: " + r.Management.Name, "the SSH session to the peer " + r.Addr.Addr().String() + " leaves by it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := c.run("run", c.scenario(tc.scenario), "--html", "-")
			if code == 0 {
				t.Fatalf("exit 0\n%s", stdout)
			}
			t.Logf("refused (exit %d): %s", code, stderr)
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("no %q in\n%s", w, stderr)
				}
			}
			// Refused before the image is even looked at.
			if strings.Contains(stderr, "image:") || strings.Contains(stderr, "building the network") {
				t.Errorf("the run went on before refusing:\n%s", stderr)
			}
			wire.check(t)
		})
	}
	t.Run("peer holds the address", func(t *testing.T) {
		// Someone else's: vfleet would take it away at the end.
		theirs := netpath.UplinkOf(netpath.Routed).Peer
		err := nsthread.DoPath(r.NetNS, func() error {
			l, err := netlink.LinkByName(r.NIC.PeerName)
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: theirs.Addr().AsSlice(), Mask: net.CIDRMask(theirs.Bits(), 32)}})
		})
		if err != nil {
			t.Fatal(err)
		}
		held := takeWire(t, r)
		_, stderr, code := c.run("run", c.scenario(remotePeerScenario(r, r.NIC.Name, r.Identity, r.KnownHosts)), "--html", "-")
		t.Logf("refused (exit %d): %s", code, stderr)
		if want := "the peer's NIC cannot be wired for the run: " + r.NIC.PeerName; code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "it holds "+theirs.String()+" on "+r.NIC.PeerName+" already") {
			t.Errorf("exit %d; want %q and the address named:\n%s", code, want, stderr)
		}
		held.check(t)
	})
	t.Run("missing program", func(t *testing.T) {
		// A peer whose PATH has its shells, ip and ethtool, and no
		// measuring tool.
		shells := t.TempDir()
		for _, sh := range []string{"sh", "bash", "env"} {
			p, err := exec.LookPath(sh)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, filepath.Join(shells, sh)); err != nil {
				t.Fatal(err)
			}
		}
		bare := testutil.RemoteMachine(t, testutil.RemotePATH("/usr/sbin:"+shells))
		_, stderr, code := c.run("run", c.scenario(remotePeerScenario(bare, bare.NIC.Name, bare.Identity, bare.KnownHosts)), "--html", "-")
		t.Logf("refused (exit %d): %s", code, stderr)
		if code == 0 || !strings.Contains(stderr, "install the Debian package sockperf on "+bare.URL) || !strings.Contains(stderr, "install the Debian package iperf3 on "+bare.URL) {
			t.Errorf("exit %d; want sockperf and iperf3 named with their packages:\n%s", code, stderr)
		}
	})
}

// The remote peer measures what the local one does: on the tests' remote
// machine, whose wire is a veth as the local peer's uplink is, round trips
// (sockperf's median) and 16 KiB bulk throughput within 5% of the local
// peer's, over runs of each in turn. Opt-in (VFLEET_PEER_BENCH=1): it
// measures, and a busy machine moves its figures.
func TestPeerBenchmark(t *testing.T) {
	if os.Getenv("VFLEET_PEER_BENCH") != "1" {
		t.Skip("a measurement: set VFLEET_PEER_BENCH=1 to run it")
	}
	testutil.RequiresRoot(t)
	testutil.Image(t)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		// Runs alternate, local, remote, remote, local, so that the
		// machine's drift falls on both sides alike.
		const reps, duration = 3, "2s"
		sums, counts := map[string]map[string]float64{}, map[string]map[string]int{}
		for _, side := range []string{"local", "remote", "remote", "local"} {
			network := "  path: routed"
			if side == "remote" {
				network = remoteNetwork(r, r.NIC.Name, r.Identity, r.KnownHosts)
			}
			if stdout, stderr, code := c.run("run", c.scenario(labScenario(reps, duration, network)), "--html", "-"); code != 0 {
				t.Fatalf("%s peer: exit %d\n%s\n%s", side, code, stdout, stderr)
			}
			if sums[side] == nil {
				sums[side], counts[side] = map[string]float64{}, map[string]int{}
			}
			for _, s := range c.latestSamples() {
				k := s.Group + " " + s.WorkloadID + " " + s.Metric
				sums[side][k] += s.Value
				counts[side][k]++
			}
		}
		mean := func(side, k string) float64 { return sums[side][k] / float64(counts[side][k]) }
		for _, k := range []string{"host rr net.rtt_us", "routed rr net.rtt_us", "host bulk net.throughput_bps", "routed bulk net.throughput_bps"} {
			local, remote := mean("local", k), mean("remote", k)
			ratio := remote / local
			t.Logf("%-32s local %12.4g  remote %12.4g  remote/local %.3f", k, local, remote, ratio)
			if local == 0 || math.Abs(ratio-1) > 0.05 {
				t.Errorf("%s: the remote peer measured %.3g, the local %.3g: more than 5%% apart", k, remote, local)
			}
		}
	})
}

// wireState is both ends of a remote machine's dedicated NIC, and what
// runs there, as a test took them before any run.
type wireState struct {
	r              *testutil.Remote
	nic, peerNIC   string
	sshdOnlyBefore []string
}

func takeWire(t *testing.T, r *testutil.Remote) *wireState {
	t.Helper()
	w := &wireState{r: r, nic: linkState(t, "", r.NIC.Name), peerNIC: linkState(t, r.NetNS, r.NIC.PeerName)}
	if w.nic == "" || w.peerNIC == "" {
		t.Fatalf("remote machine: no NIC %s or %s", r.NIC.Name, r.NIC.PeerName)
	}
	return w
}

// check finds the wire as taken, the peer's work directory empty, and no
// process or listening socket of a run on the peer.
func (w *wireState) check(t *testing.T) {
	t.Helper()
	if got := linkState(t, "", w.r.NIC.Name); got != w.nic {
		t.Errorf("NIC %s: %q, was %q", w.r.NIC.Name, got, w.nic)
	}
	if got := linkState(t, w.r.NetNS, w.r.NIC.PeerName); got != w.peerNIC {
		t.Errorf("the peer's NIC %s: %q, was %q", w.r.NIC.PeerName, got, w.peerNIC)
	}
	if entries, _ := os.ReadDir(w.r.WorkDir); len(entries) > 0 {
		t.Errorf("left in the peer's work directory: %v", entries)
	}
	if listening := peerListening(t, w.r); len(listening) > 0 {
		t.Errorf("sockets still bound on the peer: %v", listening)
	}
	// sshd's child for a refused session may still be ending.
	if left := testutil.Outliving(func() []string { return processesIn(t, w.r.NetNS, "sshd") }); len(left) > 0 {
		t.Errorf("processes left running on the peer: %v", left)
	}
}

// peerListening are the listening TCP and bound UDP sockets on the
// remote machine r but sshd's own port 22, each as "TABLE ADDR:PORT".
func peerListening(t *testing.T, r *testutil.Remote) []string {
	t.Helper()
	var listening []string
	err := nsthread.DoPath(r.NetNS, func() error {
		for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
			b, err := os.ReadFile("/proc/thread-self/net/" + table)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) <= 3 || !(f[3] == "0A" || strings.HasPrefix(table, "udp")) || strings.HasSuffix(f[1], ":0016") {
					continue
				}
				addr, err := procNetAddr(f[1])
				if err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
				listening = append(listening, table+" "+addr.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return listening
}

// procNetAddr decodes a local address of /proc/net/{tcp,udp}[6]: the
// address in hex as 32-bit words in host (little-endian) order, then the
// port in hex.
func procNetAddr(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("malformed address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		slices.Reverse(raw[i : i+4])
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("malformed port %q", s)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// linkState is a link's flags and addresses in the namespace at nsPath
// ("" for this one), "" when there is no such link.
func linkState(t *testing.T, nsPath, name string) string {
	t.Helper()
	var out string
	read := func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var as []string
		for _, a := range addrs {
			as = append(as, a.IPNet.String())
		}
		out = fmt.Sprintf("%s mtu %d %v", l.Attrs().Flags, l.Attrs().MTU, as)
		return nil
	}
	var err error
	if nsPath == "" {
		err = read()
	} else {
		err = nsthread.DoPath(nsPath, read)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// processesIn lists the running processes in the network namespace at
// nsPath but those named by keep.
func processesIn(t *testing.T, nsPath string, keep ...string) []string {
	t.Helper()
	pids, err := testutil.RunningInNetNS(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range pids {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if name := strings.TrimSpace(string(comm)); !slices.Contains(keep, name) {
			out = append(out, strconv.Itoa(pid)+" "+name)
		}
	}
	return out
}
