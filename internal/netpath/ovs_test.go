package netpath

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
)

func TestOVSTablesOnRecordedOutput(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if why, err := interfaceFailure(read("ovs-vsctl-ofport-ok.json")); err != nil || why != "" {
		t.Errorf("a working port: %q, %v", why, err)
	}
	if why, err := interfaceFailure(read("ovs-vsctl-ofport-failed.json")); err != nil || why != "could not open network device nosuch (No such device)" {
		t.Errorf("a failed port: %q, %v", why, err)
	}
	if why, err := interfaceFailure([]byte(`{"data":[[["set",[]],["set",[]]]],"headings":["ofport","error"]}`)); err != nil || why == "" {
		t.Errorf("a port not tried yet: %q, %v", why, err)
	}
	stats, err := parsePortStats(read("ovs-vsctl-statistics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := stats["o0"]; s["rx_packets"] != 213 || s["tx_packets"] != 224 || len(stats["nosuch"]) != 0 || len(stats) != 4 {
		t.Errorf("statistics %v", stats)
	}
	for _, bad := range []string{
		`not json`,
		`{"data":[["o0"]]}`,                     // a column short
		`{"data":[["o0",["set",[]]]]}`,          // not a map
		`{"data":[["o0",["map",[["a","b"]]]]]}`, // not an integer
	} {
		if _, err := parsePortStats([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// daemonLedgerEntries are a path's daemons, want of them, and its
// directory as its ledger lists them.
func daemonLedgerEntries(t *testing.T, led *ledger.Ledger, want int) (daemons []procfs.Process, dir string) {
	t.Helper()
	for _, e := range led.Pending() {
		switch e.Kind {
		case ledger.KindProcess:
			pid, _ := strconv.Atoi(e.ID)
			start, _ := strconv.ParseUint(e.Data["start_time"], 10, 64)
			daemons = append(daemons, procfs.Process{PID: pid, StartTime: start})
		case ledger.KindDir:
			dir = e.ID
		}
	}
	if len(daemons) != want || dir == "" {
		t.Fatalf("ledger lists %v, want %d daemons and a directory", led.Pending(), want)
	}
	for _, d := range daemons {
		if !d.Alive() {
			t.Fatalf("daemon %d is not running", d.PID)
		}
	}
	return daemons, dir
}

// checkDaemonsGone fails the test for a daemon still running, a process
// whose command line names the state directory, or the directory itself.
func checkDaemonsGone(t *testing.T, daemons []procfs.Process, dir string) {
	t.Helper()
	for _, d := range daemons {
		if d.Alive() {
			t.Errorf("daemon %d still runs", d.PID)
		}
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("%s names the state directory: %q", p, b)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory %s is still there (%v)", dir, err)
	}
}

// TestOVSCloseLeavesNothing builds the path with a namespace guest and a
// VM's tap, checks its description, and that Close stops both daemons and
// removes their database, sockets and logs.
func TestOVSCloseLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	stateDir := t.TempDir()
	start := time.Now()
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{OVS}, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	t.Logf("network with the ovs path built in %v", time.Since(start).Round(time.Millisecond))
	daemons, dir := daemonLedgerEntries(t, led, 2)
	if filepath.Dir(dir) != stateDir {
		t.Errorf("state directory %s is not in the run's %s", dir, stateDir)
	}
	for _, f := range []string{"conf.db", "db.sock", "ovsdb-server.ctl", "ovs-vswitchd.ctl", "ovs-vswitchd.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("daemons' file: %v", err)
		}
	}
	for _, d := range daemons {
		if own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", d.PID)); err != nil || own != hostSideNS(t, n) {
			t.Errorf("daemon %d runs in network namespace %s (%v), not in the host side's", d.PID, own, err)
		}
	}
	if _, _, err := n.Attach("ns", OVS); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AttachTap("vm", OVS); err != nil {
		t.Fatal(err)
	}
	d := n.Describe()
	t.Logf("description: %v", d)
	dp := ProbeOVSDatapath()
	for key, want := range map[string]string{
		"datapath": dp.String(),
		"ports":    "up-ovs o0 o1",
		"bridge":   ovsBridgeName + ":",
		"version":  ".",
		"offload":  "offload settings are unchanged",
	} {
		if got := d["path.ovs."+key]; !strings.Contains(got, want) {
			t.Errorf("path.ovs.%s = %q, want it to hold %q", key, got, want)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	checkDaemonsGone(t, daemons, dir)
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
	if got := n.Describe()["path.ovs.ports"]; got != "up-ovs o0 o1" {
		t.Errorf("description after close: ports %q", got)
	}
}

func hostSideNS(t *testing.T, n *Network) string {
	t.Helper()
	var own string
	if err := n.host.do(func() (err error) { own, err = os.Readlink("/proc/thread-self/ns/net"); return err }); err != nil {
		t.Fatal(err)
	}
	return own
}

// TestOVSCleanAfterKilledRun leaves the path running, as a killed vfleet
// would, and checks that cleaning the run's ledger stops the daemons and
// removes their directory.
func TestOVSCleanAfterKilledRun(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	// A fleet's network, which only undoing its ledger ends.
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{OVS}, StateDir: t.TempDir(), Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Attach("g", OVS); err != nil {
		t.Fatal(err)
	}
	daemons, dir := daemonLedgerEntries(t, led, 2)
	for _, d := range daemons {
		if sid, err := unix.Getsid(d.PID); err != nil || sid != d.PID {
			t.Errorf("a fleet's daemon %d is in session %d (%v), not its own", d.PID, sid, err)
		}
	}
	// The network's objects are forgotten from here on: only the ledger
	// on disk is left, as after a SIGKILL. The test owns the ledger, so
	// the clean is forced.
	removed, err := ledger.CleanRun(context.Background(), filepath.Dir(led.Dir()), filepath.Base(led.Dir()), ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 6 {
		t.Errorf("clean removed %d entries, want two daemons, their directory and three namespaces: %+v", len(removed), removed)
	}
	checkDaemonsGone(t, daemons, dir)
	n.Close() // releases handles; everything it held is already gone
}

// ovsHelperEnv, set, makes TestOVSDaemonsDieWithVfleet the vfleet to be
// killed, keeping its ledger under the directory the variable names.
const ovsHelperEnv = "VFLEET_TEST_OVS_KILLED_RUN"

// TestOVSDaemonsDieWithVfleet runs a network with the ovs path in another
// process, kills that process as SIGKILL would kill vfleet, and checks
// that its daemons die with it (their parent-death signal) before anyone
// cleans up, and that cleaning its ledger then leaves nothing.
func TestOVSDaemonsDieWithVfleet(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	if root := os.Getenv(ovsHelperEnv); root != "" {
		led, err := ledger.Create(root, "killed")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{OVS}, StateDir: root}); err != nil {
			t.Fatal(err)
		}
		fmt.Println("ready")
		time.Sleep(30 * time.Second) // killed long before
		t.Fatal("not killed")
	}
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOVSDaemonsDieWithVfleet$")
	cmd.Env = append(os.Environ(), ovsHelperEnv+"="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				return
			}
			t.Logf("helper: %s", sc.Text())
		}
		ready <- fmt.Errorf("the helper ended without building its network: %v", sc.Err())
	}()
	select {
	case err = <-ready:
	case <-time.After(20 * time.Second):
		err = errors.New("the helper did not build its network within 20s")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(root, "killed", "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	pending, err := ledger.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	var daemons []procfs.Process
	for _, e := range pending {
		if e.Kind == ledger.KindProcess {
			pid, _ := strconv.Atoi(e.ID)
			start, _ := strconv.ParseUint(e.Data["start_time"], 10, 64)
			daemons = append(daemons, procfs.Process{PID: pid, StartTime: start})
		}
	}
	if len(daemons) != 2 {
		t.Fatalf("the killed run's ledger lists %v, want two daemons", pending)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !daemons[0].Alive() && !daemons[1].Alive() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemons %v outlived the vfleet that started them", daemons)
		}
	}
	if _, err := ledger.CleanRun(context.Background(), root, "killed", ledger.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(root); len(left) > 0 {
		t.Errorf("left after clean: %v", left)
	}
}

// TestOVSBuildFailureLeavesNothing has ovs-vswitchd fail at its start and
// checks that the build says why, stops the database server and removes
// the directory.
func TestOVSBuildFailureLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	bin := t.TempDir()
	for _, name := range []string{"ovsdb-server", "ovsdb-tool", "ovs-vsctl"} {
		real, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	fake := "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'ovs-vswitchd (Open vSwitch) 9.9.9'; exit 0; }\necho 'ovs-vswitchd: simulated failure' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "ovs-vswitchd"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	stateDir := t.TempDir()
	start := time.Now()
	_, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{OVS}, StateDir: stateDir})
	if err == nil || !strings.Contains(err.Error(), "simulated failure") || !strings.Contains(err.Error(), "network path ovs") {
		t.Fatalf("build with a failing ovs-vswitchd: %v", err)
	}
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if time.Since(start) > ovsCommandTimeout/2 {
		t.Errorf("the build waited %v on a daemon that had exited", time.Since(start))
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
	if left, _ := os.ReadDir(stateDir); len(left) > 0 {
		t.Errorf("left in the state directory: %v", left)
	}
}

func TestOVSMissingNamesThePackage(t *testing.T) {
	testutil.RequiresRoot(t)
	t.Setenv("PATH", t.TempDir())
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	_, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{OVS}, StateDir: t.TempDir()})
	if !errors.Is(err, tools.ErrMissing) || !strings.Contains(err.Error(), "openvswitch-switch") {
		t.Fatalf("build without Open vSwitch: %v, want ErrMissing naming openvswitch-switch", err)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
}

// TestOVSFinishesAVMsOffloadedChecksum writes into a VM's tap what a
// virtio-net NIC with checksum offload hands over: a UDP datagram whose
// checksum is left for the host to finish (VIRTIO_NET_HDR_F_NEEDS_CSUM).
// The peer drops it unless the switch had it finished on the way.
func TestOVSFinishesAVMsOffloadedChecksum(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: newLedger(t), Paths: []Path{OVS}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	link, err := n.AttachTap("vm", OVS)
	if err != nil {
		t.Fatal(err)
	}
	tap := openTapIn(t, n.host, link.HostIf)
	defer tap.Close()
	var server net.PacketConn
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) {
		server, err = net.ListenPacket("udp4", netip.AddrPortFrom(link.Peer, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	dst := netip.AddrPortFrom(link.Peer, uint16(server.LocalAddr().(*net.UDPAddr).Port))
	frame := offloadedUDP(link.MAC, OVS, link.Addr.Addr(), dst, []byte("finish my checksum"))
	buf := make([]byte, 64)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := tap.Write(frame); err != nil {
			t.Fatal(err)
		}
		_ = server.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if k, _, err := server.ReadFrom(buf); err == nil {
			if string(buf[:k]) != "finish my checksum" {
				t.Fatalf("the peer got %q", buf[:k])
			}
			return
		}
	}
	t.Fatal("the VM's datagram with an offloaded checksum never reached the peer")
}

// offloadedUDP is a tap frame from src to dst on path p's peer: a
// virtio-net header asking for the UDP checksum to be finished, and the
// checksum field holding only the pseudo-header's sum, as a NIC with
// checksum offload gets it.
func offloadedUDP(srcMAC net.HardwareAddr, p Path, src netip.Addr, dst netip.AddrPort, payload []byte) []byte {
	const ethLen, ipLen, udpLen = 14, 20, 8
	frame := make([]byte, vnetHdrLen+ethLen+ipLen+udpLen+len(payload))
	hdr := frame[:vnetHdrLen]
	hdr[0] = unix.VIRTIO_NET_HDR_F_NEEDS_CSUM
	binary.NativeEndian.PutUint16(hdr[6:8], ethLen+ipLen) // csum_start
	binary.NativeEndian.PutUint16(hdr[8:10], 6)           // csum_offset: the UDP checksum
	eth := frame[vnetHdrLen:]
	copy(eth[0:6], specOf(p).mac(uplinkIndex, 1))
	copy(eth[6:12], srcMAC)
	binary.BigEndian.PutUint16(eth[12:14], unix.ETH_P_IP)
	ip := eth[ethLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen+udpLen+len(payload)))
	s4, d4 := src.As4(), dst.Addr().As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:12], ^onesSum(ip[:ipLen]))
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:2], 40000)
	binary.BigEndian.PutUint16(udp[2:4], dst.Port())
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen+len(payload)))
	copy(udp[udpLen:], payload)
	pseudo := append(append(append([]byte{}, s4[:]...), d4[:]...), 0, unix.IPPROTO_UDP, udp[4], udp[5])
	binary.BigEndian.PutUint16(udp[6:8], onesSum(pseudo))
	return frame
}

// onesSum is the folded ones' complement sum of b's 16-bit words.
func onesSum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
