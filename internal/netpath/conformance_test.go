package netpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestDataPathConformance is the test every registered data path passes,
// all of them built into one network as a run builds them: a namespace
// guest (a container) reaches the peer and the peer reaches it where the
// path takes namespace guests, and is refused with ErrPathNotForNamespaces
// where it does not; the host side forwards the traffic exactly when the
// path routes through the stack, and a path with counters of its own
// counts it instead; a VM's device carries traffic both ways where the
// path takes VMs, and is refused with ErrPathNotForVMs where it does not;
// and closing the network leaves no namespace, link, process, file or
// ledger entry behind. A new path gets all
// of this by registering itself.
func TestDataPathConformance(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: GuestPaths()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if p := led.Pending(); len(p) > 0 {
			t.Errorf("ledger still lists %v", p)
		}
	}()
	port := echoServer(t, n.PeerNS())
	if err := roundTrips(t, n.HostSide(), netip.AddrPortFrom(UplinkOf(Direct).Peer.Addr(), uint16(port)), 3); err != nil {
		t.Fatalf("host side to peer over the direct link: %v", err)
	}
	for _, p := range GuestPaths() {
		t.Run(string(p), func(t *testing.T) {
			conformNamespace(t, n, p, port)
			conformTap(t, n, p)
		})
	}
	d := n.Describe()
	for _, p := range GuestPaths() {
		if d["path."+string(p)+".uplink"] == "" {
			t.Errorf("description lacks path %s: %v", p, d)
		}
		if _, counting := n.live[p].(Counting); counting && d["path."+string(p)+".counters"] == "" {
			t.Errorf("description lacks the counters of path %s: %v", p, d)
		}
	}
}

// conformNamespace attaches two namespace guests to p and checks traffic
// both ways, and who carried it, or checks that p refuses them.
func conformNamespace(t *testing.T, n *Network, p Path, peerPort int) {
	if CheckNamespacePath(p) != nil {
		if _, _, err := n.Attach("ns-"+string(p), p); !errors.Is(err, ErrPathNotForNamespaces) {
			t.Errorf("namespace guest attached, or not refused as ErrPathNotForNamespaces: %v", err)
		}
		return
	}
	for i := range 2 {
		link, nsPath, err := n.Attach("ns-"+string(p)+"-"+string(rune('0'+i)), p)
		if err != nil {
			t.Fatal(err)
		}
		peer := netip.AddrPortFrom(link.Peer, uint16(peerPort))
		// The first exchange resolves neighbours through the stack.
		if err := roundTrips(t, nsPath, peer, 2); err != nil {
			t.Fatalf("guest %s to peer %s: %v", link.Addr, link.Peer, err)
		}
		fwdBefore, err := n.ForwardedPackets()
		if err != nil {
			t.Fatal(err)
		}
		c0, counting, err := n.FastPathCounters(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := roundTrips(t, nsPath, peer, 200); err != nil {
			t.Fatal(err)
		}
		fwd, _ := n.ForwardedPackets()
		c, _, _ := n.FastPathCounters(p)
		switch {
		case counting:
			if c.Redirected-c0.Redirected < 200 {
				t.Errorf("only %d packets redirected for 200 round trips (%+v)", c.Redirected-c0.Redirected, c)
			}
			// A new connection's handshake may still meet an unresolved
			// neighbour; a few packets through the stack are allowed.
			if fwd-fwdBefore > 10 {
				t.Errorf("host side forwarded %d packets the path's programs should have carried", fwd-fwdBefore)
			}
		case specOf(p).Layout == LayoutRouted:
			if fwd-fwdBefore < 400 {
				t.Errorf("host side forwarded only %d packets for 200 round trips", fwd-fwdBefore)
			}
		default:
			if fwd != fwdBefore {
				t.Errorf("host side forwarded %d packets on a path that does not route", fwd-fwdBefore)
			}
		}
		// The other way: a server in the guest, its client in the peer.
		guestPort := echoServer(t, nsPath)
		if err := roundTrips(t, n.PeerNS(), netip.AddrPortFrom(link.Addr.Addr(), uint16(guestPort)), 20); err != nil {
			t.Errorf("peer to guest %s: %v", link.Addr, err)
		}
	}
}

// tapFrames is how many datagrams conformTap counts each way.
const tapFrames = 100

// conformTap attaches a VM's device to p, or checks that p refuses it,
// and sends UDP over IPv4 through it both ways as the VM's NIC would: the
// peer must receive the VM's datagrams and the VM the peer's answers to
// where they came from (the VM itself, or the host side for a NAT path),
// carried by whoever the path says, as for a namespace guest.
func conformTap(t *testing.T, n *Network, p Path) {
	name := "vm-" + string(p)
	if CheckVMPath(p) != nil {
		if _, err := n.AttachTap(name, p); !errors.Is(err, ErrPathNotForVMs) {
			t.Errorf("tap attached, or not refused as ErrPathNotForVMs: %v", err)
		}
		return
	}
	if specOf(p).VMDevice == VMVFIO {
		// A lent device is the VM's own driver's: the host has no
		// descriptor to send its frames through.
		if err := CheckPassthroughHost(hostRoot); err != nil {
			t.Skipf("VM device: %v", err)
		}
		t.Skipf("VM device: a lent PCI device carries the VM's frames with no host device; TestPassthroughDevice lends one where %s names it", passthroughEnv)
	}
	link, err := n.AttachTap(name, p)
	if err != nil {
		t.Fatal(err)
	}
	dev, kind, err := OpenVMDevice(n.HostSide(), link.HostIf)
	if err != nil {
		t.Fatalf("open %s: %v", link.HostIf, err)
	}
	if kind != specOf(p).VMDevice {
		t.Errorf("%s opened as a %s, want a %s", link.HostIf, kind, specOf(p).VMDevice)
	}
	nic := newFakeNIC(dev, kind, link)
	defer nic.dev.Close()
	// The VM asks for its next hop: its gateway, or the peer on its own
	// segment.
	next := link.Gateway
	if !next.IsValid() {
		next = link.Peer
	}
	nextMAC, err := nic.resolve(next)
	if err != nil {
		t.Fatalf("guest %s asking for %s: %v", link.Addr, next, err)
	}
	var server net.PacketConn
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) {
		server, err = net.ListenPacket("udp4", netip.AddrPortFrom(link.Peer, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	guest := netip.AddrPortFrom(link.Addr.Addr(), 40000)
	toPeer := udpFrame(link.MAC, nextMAC, guest, server.LocalAddr().(*net.UDPAddr).AddrPort(), []byte("from the vm"))
	isFromPeer := func(f []byte) bool { return udpTo(f, guest) }

	// The first exchange each way resolves neighbours through the stack.
	seen, err := toPeerUntilReceived(nic, toPeer, server)
	if err != nil {
		t.Fatalf("guest %s to peer %s: %v", link.Addr, link.Peer, err)
	}
	// A NAT path's traffic leaves from the host side's own sockets.
	want := guest.Addr()
	if specOf(p).Layout == LayoutNAT {
		want = UplinkOf(p).Host.Addr()
	}
	if got := seen.(*net.UDPAddr).AddrPort().Addr(); got != want {
		t.Errorf("the peer saw the guest as %s, want %s", got, want)
	}
	fromPeer := func() { _, _ = server.WriteTo([]byte("to the vm"), seen) }
	if err := nic.await(fromPeer, isFromPeer); err != nil {
		t.Fatalf("peer to guest %s: %v", link.Addr, err)
	}
	fwdBefore, err := n.ForwardedPackets()
	if err != nil {
		t.Fatal(err)
	}
	c0, counting, err := n.FastPathCounters(p)
	if err != nil {
		t.Fatal(err)
	}
	for range tapFrames {
		if err := nic.write(toPeer); err != nil {
			t.Fatal(err)
		}
	}
	if got := receiveDatagrams(server, tapFrames); got != tapFrames {
		t.Errorf("the peer received %d of the guest's %d datagrams", got, tapFrames)
	}
	for range tapFrames {
		fromPeer()
	}
	if got := nic.count(isFromPeer, tapFrames); got != tapFrames {
		t.Errorf("the guest received %d of the peer's %d datagrams", got, tapFrames)
	}
	fwd, _ := n.ForwardedPackets()
	c, _, _ := n.FastPathCounters(p)
	switch {
	case counting:
		t.Logf("%s: the path's programs, for %d datagrams each way: %v, %d of them by bpf_redirect_neigh", p, tapFrames, c.Sub(c0), c.RedirectedNeigh-c0.RedirectedNeigh)
		if c.Redirected-c0.Redirected < 2*tapFrames {
			t.Errorf("only %d packets redirected for %d datagrams each way (%v)", c.Redirected-c0.Redirected, tapFrames, c.Sub(c0))
		}
		if fwd-fwdBefore > 10 {
			t.Errorf("host side forwarded %d packets the path's programs should have carried", fwd-fwdBefore)
		}
	case specOf(p).Layout == LayoutRouted:
		if fwd-fwdBefore < 2*tapFrames {
			t.Errorf("host side forwarded only %d packets for %d datagrams each way", fwd-fwdBefore, tapFrames)
		}
	default:
		if fwd != fwdBefore {
			t.Errorf("host side forwarded %d packets on a path that does not route", fwd-fwdBefore)
		}
	}
}

// fakeNIC stands in for a VM's NIC on its device in the host side: it
// writes frames as the guest's driver does without offloads, and reads
// what the host side hands the guest, answering ARP for the guest's
// address, which the host side or the peer asks before sending it
// anything.
type fakeNIC struct {
	dev    *os.File
	kind   VMDevice
	frames frameSource
	link   Link
}

func newFakeNIC(dev *os.File, kind VMDevice, link Link) fakeNIC {
	var frames frameSource = &tapSource{f: dev}
	if kind == VMPasst {
		frames = &streamSource{f: dev}
	}
	return fakeNIC{dev: dev, kind: kind, frames: frames, link: link}
}

// write sends one frame as the device takes it: behind a virtio-net
// header that asks for nothing, or on passt's stream behind its length.
func (v fakeNIC) write(frame []byte) error {
	hdr := make([]byte, vnetHdrLen)
	if v.kind == VMPasst {
		hdr = binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	}
	_, err := v.dev.Write(append(hdr, frame...))
	return err
}

// answerARP answers f if it asks for the guest's address, and says so.
func (v fakeNIC) answerARP(f []byte) bool {
	if target, _ := netip.AddrFromSlice(f[38:42]); arpOp(f) != 1 || target != v.link.Addr.Addr() {
		return false
	}
	asker, _ := netip.AddrFromSlice(f[28:32])
	_ = v.write(arpFrame(2, v.link.MAC, v.link.Addr.Addr(), net.HardwareAddr(f[22:28]), asker))
	return true
}

// await is awaitFrame on the NIC, answering ARP on the way.
func (v fakeNIC) await(send func(), match func(frame []byte) bool) error {
	return awaitFrames(v.frames, send, func(f []byte) bool { return !v.answerARP(f) && match(f) })
}

// resolve asks for target's MAC as the guest's stack does.
func (v fakeNIC) resolve(target netip.Addr) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	request := arpFrame(1, v.link.MAC, v.link.Addr.Addr(), nil, target)
	err := v.await(func() { _ = v.write(request) }, func(r []byte) bool {
		sender, _ := netip.AddrFromSlice(r[28:32])
		if arpOp(r) == 2 && sender == target {
			mac = append(net.HardwareAddr{}, r[22:28]...)
		}
		return mac != nil
	})
	if err != nil {
		return nil, fmt.Errorf("no ARP reply came back: %w", err)
	}
	return mac, nil
}

// count reads frames for up to five seconds, answering ARP, until want of
// them matched, and returns how many did.
func (v fakeNIC) count(match func(frame []byte) bool, want int) int {
	got := 0
	_ = awaitFrames(v.frames, func() {}, func(f []byte) bool {
		if !v.answerARP(f) && match(f) {
			got++
		}
		return got == want
	})
	return got
}

// toPeerUntilReceived writes the guest's frame every half second until
// the peer's socket receives it, for up to five seconds, and returns where
// the peer saw it come from.
func toPeerUntilReceived(nic fakeNIC, frame []byte, server net.PacketConn) (net.Addr, error) {
	buf := make([]byte, 64)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err := nic.write(frame); err != nil {
			return nil, err
		}
		_ = server.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, from, err := server.ReadFrom(buf); err == nil {
			return from, nil
		}
	}
	return nil, errNoFrame
}

// receiveDatagrams reads from the socket until want datagrams came or none
// came for a second, and returns how many did.
func receiveDatagrams(conn net.PacketConn, want int) int {
	buf := make([]byte, 64)
	got := 0
	for got < want {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := conn.ReadFrom(buf); err != nil {
			break
		}
		got++
	}
	return got
}

// arpFrame is an ARP request (op 1, to everyone: dstMAC nil) or reply
// (op 2) from src at srcMAC about dst.
func arpFrame(op uint16, srcMAC net.HardwareAddr, src netip.Addr, dstMAC net.HardwareAddr, dst netip.Addr) []byte {
	f := make([]byte, 42)
	if dstMAC == nil {
		copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	} else {
		copy(f[0:6], dstMAC)
		copy(f[32:38], dstMAC)
	}
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(f[14:16], 1)      // Ethernet
	binary.BigEndian.PutUint16(f[16:18], 0x0800) // IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:22], op)
	copy(f[22:28], srcMAC)
	s4, d4 := src.As4(), dst.As4()
	copy(f[28:32], s4[:])
	copy(f[38:42], d4[:])
	return f
}

// udpFrame is a UDP datagram from src to dst as a guest's stack without
// offloads sends it: the IPv4 checksum complete, the UDP checksum 0 (none).
func udpFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	const ethLen, ipLen, udpLen = 14, 20, 8
	f := make([]byte, ethLen+ipLen+udpLen+len(payload))
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_IP)
	ip := f[ethLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen+udpLen+len(payload)))
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:12], ^onesSum(ip[:ipLen]))
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:2], src.Port())
	binary.BigEndian.PutUint16(udp[2:4], dst.Port())
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen+len(payload)))
	copy(udp[udpLen:], payload)
	return f
}

// udpTo says whether frame carries a UDP datagram for dst.
func udpTo(frame []byte, dst netip.AddrPort) bool {
	const ethLen = 14
	if len(frame) < ethLen+28 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_IP {
		return false
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[9] != unix.IPPROTO_UDP || len(ip) < ihl+8 {
		return false
	}
	addr, _ := netip.AddrFromSlice(ip[16:20])
	return addr == dst.Addr() && binary.BigEndian.Uint16(ip[ihl+2:ihl+4]) == dst.Port()
}
