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

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestDataPathConformance is the test every registered data path passes,
// all of them built into one network as a run builds them: a namespace
// guest (a container) reaches the peer and the peer reaches it; the host
// side forwards the traffic exactly when the path routes through the
// stack, and a path with counters of its own counts it instead; a VM's
// tap carries traffic both ways where the path takes VMs, and is refused
// with ErrPathNotForVMs where it does not; and closing the network leaves
// no namespace, link, process or ledger entry behind. A new path gets all
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
	if err := roundTrips(t, n.HostSide(), netip.AddrPortFrom(n.DirectPeer(), uint16(port)), 3); err != nil {
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
// both ways, and who carried it.
func conformNamespace(t *testing.T, n *Network, p Path, peerPort int) {
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

// conformTap attaches a VM's tap to p, or checks that p refuses it, and
// sends through the tap both ways as the VM's NIC would.
func conformTap(t *testing.T, n *Network, p Path) {
	name := "vm-" + string(p)
	if CheckVMPath(p) != nil {
		if _, err := n.AttachTap(name, p); !errors.Is(err, ErrPathNotForVMs) {
			t.Errorf("tap attached, or not refused as ErrPathNotForVMs: %v", err)
		}
		return
	}
	link, err := n.AttachTap(name, p)
	if err != nil {
		t.Fatal(err)
	}
	tap := openTapIn(t, n.host, link.HostIf)
	defer tap.Close()
	// Peer to guest: the peer's packet for the guest makes whoever routes
	// or switches it ask for the guest's address on the tap.
	var conn net.Conn
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(link.Addr.Addr(), 9).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := waitARPFor(t, tap, link.Addr.Addr(), func() { _, _ = conn.Write([]byte("x")) }); err != nil {
		t.Errorf("peer to guest %s: %v", link.Addr, err)
	}
	// Guest to peer: the VM asks for its next hop and gets an answer.
	next := link.Gateway
	if !next.IsValid() {
		next = link.Peer
	}
	if err := arpThroughTap(tap, link, next); err != nil {
		t.Errorf("guest %s to %s: %v", link.Addr, next, err)
	}
}

// arpThroughTap writes the VM's ARP request for target into the tap and
// waits for the reply to come back through it.
func arpThroughTap(tap *os.File, link Link, target netip.Addr) error {
	frame := make([]byte, vnetHdrLen+42)
	f := frame[vnetHdrLen:]
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], link.MAC)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(f[14:16], 1)      // Ethernet
	binary.BigEndian.PutUint16(f[16:18], 0x0800) // IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:22], 1) // request
	copy(f[22:28], link.MAC)
	src := link.Addr.Addr().As4()
	copy(f[28:32], src[:])
	dst := target.As4()
	copy(f[38:42], dst[:])
	err := awaitFrame(tap, func() { _, _ = tap.Write(frame) }, func(r []byte) bool {
		sender, _ := netip.AddrFromSlice(r[28:32])
		return arpOp(r) == 2 && sender == target
	})
	if err != nil {
		return fmt.Errorf("no ARP reply came back through the tap: %w", err)
	}
	return nil
}
