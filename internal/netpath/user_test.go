package netpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// The user path takes VMs only, and its guests cannot be reached from the
// peer: each refusal says why and which sentinel it is.
func TestUserPathRefusesWhatItCannotCarry(t *testing.T) {
	if err := CheckVMPath(User); err != nil {
		t.Errorf("VMs refused: %v", err)
	}
	err := CheckNamespacePath(User)
	if !errors.Is(err, ErrPathNotForNamespaces) || !strings.Contains(err.Error(), "passt") ||
		!strings.Contains(err.Error(), "namespace guests take bridge,") || strings.Contains(err.Error(), "user,") {
		t.Errorf("namespace guests: %v; want ErrPathNotForNamespaces naming passt and the paths that take them", err)
	}
	if err := CheckNamespacePath(Routed); err != nil {
		t.Errorf("namespace guests refused on routed: %v", err)
	}
	if err := CheckInbound(User); !errors.Is(err, ErrNoInbound) || !strings.Contains(err.Error(), "user:") {
		t.Errorf("inbound: %v; want ErrNoInbound naming the path", err)
	}
	if err := CheckInbound(Routed); err != nil {
		t.Errorf("inbound refused on routed: %v", err)
	}
	if u := UplinkOf(User); len(u.Routes) != 0 {
		t.Errorf("the peer has routes %v to guests it never sees", u.Routes)
	}
}

// passt's socket counts as ready once it listens, not once it is bound.
func TestUnixListening(t *testing.T) {
	table := []byte(`Num       RefCount Protocol Flags    Type St Inode Path
00000000cb626878: 00000002 00000000 00010000 0001 01 3586400 /s/hs-user/u0.sock
0000000018a863df: 00000002 00000000 00000000 0001 01 3586401 /s/hs-user/u1.sock
00000000e8164365: 00000003 00000000 00000000 0001 03 3586744
`)
	for path, want := range map[string]bool{"/s/hs-user/u0.sock": true, "/s/hs-user/u1.sock": false, "/s/hs-user/u2.sock": false} {
		if got := unixListening(table, path); got != want {
			t.Errorf("%s: listening %v, want %v", path, got, want)
		}
	}
}

// TestUserVMReachesThePeerOnly attaches two VMs to the user path: each
// gets a passt of its own in the host side, in the ledger, listening at
// its socket in the run's directory; a VM's datagrams reach the peer on
// the path's uplink, and not the peer's address on another path, which
// the host side reaches too. A passt that cannot listen fails its attach;
// Close stops every passt and removes the directory.
func TestUserVMReachesThePeerOnly(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "passt", "passt")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	stateDir := t.TempDir()
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{User}, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var links []Link
	for i := range 2 {
		link, err := n.AttachTap(fmt.Sprintf("vm%d", i), User)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, link)
	}
	daemons, dir := daemonLedgerEntries(t, led, 2)
	if filepath.Dir(dir) != stateDir || filepath.Dir(links[0].HostIf) != dir {
		t.Errorf("socket %s, directory %s: want the socket in the directory, in the run's %s", links[0].HostIf, dir, stateDir)
	}
	for _, d := range daemons {
		if own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", d.PID)); err != nil || own != hostSideNS(t, n) {
			t.Errorf("passt %d runs in network namespace %s (%v), not in the host side's", d.PID, own, err)
		}
	}
	if links[0].Addr == links[1].Addr {
		t.Errorf("both VMs have address %s", links[0].Addr)
	}

	dev, kind, err := OpenVMDevice(n.HostSide(), links[0].HostIf)
	if err != nil || kind != VMPasst {
		t.Fatalf("open %s: a %s, %v; want passt's stream", links[0].HostIf, kind, err)
	}
	nic := newFakeNIC(dev, kind, links[0])
	defer dev.Close()
	gwMAC, err := nic.resolve(links[0].Gateway)
	if err != nil {
		t.Fatal(err)
	}
	if gwMAC.String() != links[0].HostMAC.String() {
		t.Errorf("the gateway answers as %s, want the link's host end %s", gwMAC, links[0].HostMAC)
	}
	var server net.PacketConn
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) { server, err = net.ListenPacket("udp4", "0.0.0.0:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	port := uint16(server.LocalAddr().(*net.UDPAddr).Port)
	guest := netip.AddrPortFrom(links[0].Addr.Addr(), 40000)
	elsewhere := netip.AddrPortFrom(UplinkOf(Direct).Peer.Addr(), port)
	if err := roundTrips(t, n.HostSide(), netip.AddrPortFrom(UplinkOf(Direct).Peer.Addr(), uint16(echoServer(t, n.PeerNS()))), 1); err != nil {
		t.Fatalf("the host side does not reach the peer's %s itself: %v", UplinkOf(Direct).Peer.Addr(), err)
	}
	for range 3 {
		if err := nic.write(udpFrame(links[0].MAC, gwMAC, guest, elsewhere, []byte("elsewhere"))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := toPeerUntilReceived(nic, udpFrame(links[0].MAC, gwMAC, guest, netip.AddrPortFrom(links[0].Peer, port), []byte("peer")), server); err != nil {
		t.Fatalf("VM to the peer %s: %v", links[0].Peer, err)
	}
	// A ping of the peer is answered, through passt's ping socket.
	ping := icmpEcho(links[0].MAC, gwMAC, guest.Addr(), links[0].Peer)
	err = nic.await(func() { _ = nic.write(ping) }, func(f []byte) bool {
		return len(f) >= 14+20+8 && binary.BigEndian.Uint16(f[12:14]) == unix.ETH_P_IP && f[14+9] == unix.IPPROTO_ICMP && f[14+20] == 0
	})
	if err != nil {
		t.Errorf("ping of the peer %s: no echo reply: %v", links[0].Peer, err)
	}
	buf := make([]byte, 64)
	for {
		// The datagram to the peer came after the others: anything left
		// to read is one that should not have come.
		_ = server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		k, from, err := server.ReadFrom(buf)
		if err != nil {
			break
		}
		if string(buf[:k]) == "elsewhere" {
			t.Errorf("a datagram for %s reached the peer from %s", elsewhere, from)
		}
	}

	// A passt that cannot make its socket: the attach fails, and nothing
	// of it is left once the network closes.
	if err := os.Mkdir(passtSocket(n.sides, "u2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AttachTap("vm2", User); err == nil || !strings.Contains(err.Error(), "passt") {
		t.Errorf("attach with a directory where passt's socket goes: %v, want passt's failure", err)
	}
	d := n.Describe()
	if got := d["path.user.passts"]; !strings.Contains(got, links[1].HostIf) || !strings.Contains(d["path.user.passt"], "passt") {
		t.Errorf("description: %v", d)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	checkDaemonsGone(t, daemons, dir)
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
}

// TestUserCleanAfterKilledRun leaves a fleet's user path running, as a
// killed vfleet would, and checks that cleaning the run's ledger stops
// its passt and removes its directory.
func TestUserCleanAfterKilledRun(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "passt", "passt")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{User}, StateDir: t.TempDir(), Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AttachTap("vm", User); err != nil {
		t.Fatal(err)
	}
	daemons, dir := daemonLedgerEntries(t, led, 1)
	if sid, err := unix.Getsid(daemons[0].PID); err != nil || sid != daemons[0].PID {
		t.Errorf("a fleet's passt %d is in session %d (%v), not its own", daemons[0].PID, sid, err)
	}
	removed, err := ledger.CleanRun(context.Background(), filepath.Dir(led.Dir()), filepath.Base(led.Dir()), ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 4 {
		t.Errorf("clean removed %d entries, want passt, its directory and the two namespaces: %+v", len(removed), removed)
	}
	checkDaemonsGone(t, daemons, dir)
	n.Close() // releases handles; everything it held is already gone
}

// icmpEcho is an ICMP echo request from src to dst, checksums complete.
func icmpEcho(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr) []byte {
	const ethLen, ipLen, icmpLen = 14, 20, 16
	f := make([]byte, ethLen+ipLen+icmpLen)
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_IP)
	ip := f[ethLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_ICMP
	binary.BigEndian.PutUint16(ip[2:4], ipLen+icmpLen)
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:12], ^onesSum(ip[:ipLen]))
	icmp := ip[ipLen:]
	icmp[0] = 8 // echo request
	binary.BigEndian.PutUint16(icmp[4:6], 0x7666)
	binary.BigEndian.PutUint16(icmp[6:8], 1)
	copy(icmp[8:], "vfleet!!")
	binary.BigEndian.PutUint16(icmp[2:4], ^onesSum(icmp))
	return f
}
