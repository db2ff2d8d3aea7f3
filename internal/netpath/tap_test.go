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

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// rootLinks names the root namespace's links: a device left in a dying
// namespace would be moved there rather than deleted.
func rootLinks(t *testing.T) map[string]bool {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range links {
		out[l.Attrs().Name] = true
	}
	return out
}

// openTapIn opens an existing tap from inside the namespace, as a VM's
// emulator does, non-blocking so reads can have a deadline.
func openTapIn(t *testing.T, ns *namespace, name string) *os.File {
	t.Helper()
	var f *os.File
	err := ns.do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(TapFlags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), name)
		return nil
	})
	if err != nil {
		t.Fatalf("open tap %s: %v", name, err)
	}
	return f
}

// vnetHdrLen is the virtio-net header in front of every frame a tap with
// IFF_VNET_HDR hands out, at the kernel's default size.
const vnetHdrLen = 10

// waitARPFor reads frames from a tap until an ARP request for addr
// arrives: the host side (routed) or the bridge (switched) has sent the
// peer's packet towards the tap.
func waitARPFor(t *testing.T, tap *os.File, addr netip.Addr, send func()) error {
	t.Helper()
	err := awaitFrame(tap, send, func(f []byte) bool {
		target, _ := netip.AddrFromSlice(f[38:42])
		return arpOp(f) == 1 && target == addr
	})
	if err != nil {
		return fmt.Errorf("no ARP request for the guest's address reached the tap: %w", err)
	}
	return nil
}

// arpOp is an ARP frame's operation (1 request, 2 reply), 0 for another
// frame.
func arpOp(f []byte) uint16 {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_ARP {
		return 0
	}
	return binary.BigEndian.Uint16(f[20:22])
}

// errNoFrame says awaitFrame's deadline passed.
var errNoFrame = errors.New("no such frame within 5s")

// awaitFrame calls send, then reads frames (without their virtio-net
// header) from the tap until match accepts one, sending again every half
// second for up to five. Other frames, such as the IPv6 neighbour
// discovery of new links, are skipped.
func awaitFrame(tap *os.File, send func(), match func(frame []byte) bool) error {
	buf := make([]byte, 2048)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		send()
		for {
			_ = tap.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := tap.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return err
			}
			if n >= vnetHdrLen && match(buf[vnetHdrLen:n]) {
				return nil
			}
		}
	}
	return errNoFrame
}

// TestAttachTap puts a VM's tap on the routed and the bridge path and
// checks the device (persistent tap with virtio-net headers, address or
// bridge port, up), that the peer's packets for the guest reach it, that
// the other paths are refused, and that Close takes the taps along.
func TestAttachTap(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	linksBefore := rootLinks(t)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{Routed, Bridge}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, p := range []Path{Direct, XDP} { // not built, and (conformance) not for VMs
		if _, err := n.AttachTap("vm-"+string(p), p); !errors.Is(err, ErrPathNotForVMs) {
			t.Errorf("%s: tap attached or wrong error: %v", p, err)
		}
	}
	// A namespace guest first: the tap must take the path's next address.
	first, _, err := n.Attach("ns-guest", Routed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Path{Routed, Bridge} {
		link, err := n.AttachTap("vm-"+string(p), p)
		if err != nil {
			t.Fatal(err)
		}
		if p == Routed && (link.Addr == first.Addr || link.HostIf != "r1" || link.Gateway != link.HostIP.Addr()) {
			t.Errorf("routed tap link %+v collides with the namespace guest's %+v", link, first)
		}
		l, err := n.host.nl.LinkByName(link.HostIf)
		if err != nil {
			t.Fatalf("%s: tap %s not in the host side: %v", p, link.HostIf, err)
		}
		tap, ok := l.(*netlink.Tuntap)
		if !ok || tap.Mode != netlink.TUNTAP_MODE_TAP || tap.NonPersist || tap.Flags&netlink.TUNTAP_VNET_HDR == 0 || tap.Flags&netlink.TUNTAP_NO_PI == 0 {
			t.Errorf("%s: %s is %T %+v, want a persistent tap with vnet headers and no PI", p, link.HostIf, l, l)
		}
		if l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().HardwareAddr.String() != link.HostMAC.String() {
			t.Errorf("%s: tap %s flags %v mac %s", p, link.HostIf, l.Attrs().Flags, l.Attrs().HardwareAddr)
		}
		switch p {
		case Routed:
			addrs, err := n.host.nl.AddrList(l, netlink.FAMILY_V4)
			if err != nil || len(addrs) != 1 || addrs[0].IPNet.String() != link.HostIP.String() {
				t.Errorf("routed tap addresses %v (%v), want %s", addrs, err, link.HostIP)
			}
		case Bridge:
			br, err := n.host.nl.LinkByName(bridgeName)
			if err != nil || l.Attrs().MasterIndex != br.Attrs().Index {
				t.Errorf("bridge tap master %d, want %s (%v)", l.Attrs().MasterIndex, bridgeName, err)
			}
		}
		f := openTapIn(t, n.host, link.HostIf)
		var conn net.Conn
		if err := nsthread.DoPath(n.PeerNS(), func() (err error) {
			conn, err = net.Dial("udp4", netip.AddrPortFrom(link.Addr.Addr(), 9).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		err = waitARPFor(t, f, link.Addr.Addr(), func() { _, _ = conn.Write([]byte("x")) })
		conn.Close()
		f.Close()
		if err != nil {
			t.Errorf("%s: peer to guest %s: %v", p, link.Addr, err)
		}
	}
	if _, err := n.AttachTap("vm-"+string(Routed), Routed); err == nil {
		t.Error("one VM attached twice")
	}
	if len(led.Pending()) != 3 {
		t.Errorf("ledger lists %v, want the host side, the peer and the namespace guest only", led.Pending())
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
	if _, err := n.AttachTap("late", Routed); !errors.Is(err, errClosed) {
		t.Errorf("attach after close: %v", err)
	}
	for name := range rootLinks(t) {
		if !linksBefore[name] {
			t.Errorf("link %s appeared in the root namespace", name)
		}
	}
}
