package netpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
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

// openTapIn opens a VM's device (a tap or a macvtap) in the namespace
// with the opener the VM's emulator gets it from; it is non-blocking, so
// reads can have a deadline.
func openTapIn(t *testing.T, ns *namespace, name string) *os.File {
	t.Helper()
	f, _, err := OpenVMDevice(NSPath(ns.name), name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
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
	return awaitFrames(&tapSource{f: tap}, send, match)
}

// awaitFrames is awaitFrame on any VM device's frames.
func awaitFrames(src frameSource, send func(), match func(frame []byte) bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		send()
		for {
			f, err := src.readFrame()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return err
			}
			if match(f) {
				return nil
			}
		}
	}
	return errNoFrame
}

// frameSource hands out the frames a VM's device gives the VM, one at a
// time, each within half a second or os.ErrDeadlineExceeded.
type frameSource interface {
	readFrame() ([]byte, error)
}

// tapSource hands out the frames of a tap or a macvtap: one per read, behind a
// virtio-net header.
type tapSource struct {
	f   *os.File
	buf [2048]byte
}

func (t *tapSource) readFrame() ([]byte, error) {
	for {
		_ = t.f.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := t.f.Read(t.buf[:])
		if err != nil {
			return nil, err
		}
		if n >= vnetHdrLen {
			return t.buf[vnetHdrLen:n], nil
		}
	}
}

// streamSource hands out the frames of passt's stream, each behind its length as
// a 32-bit big-endian number. A frame split across reads is kept until its
// end comes.
type streamSource struct {
	f       *os.File
	pending []byte
}

func (s *streamSource) readFrame() ([]byte, error) {
	buf := make([]byte, 64<<10)
	for {
		if len(s.pending) >= 4 {
			if end := 4 + int(binary.BigEndian.Uint32(s.pending)); len(s.pending) >= end {
				frame := append([]byte(nil), s.pending[4:end]...)
				s.pending = s.pending[end:]
				return frame, nil
			}
		}
		_ = s.f.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := s.f.Read(buf)
		if err != nil {
			return nil, err
		}
		s.pending = append(s.pending, buf[:n]...)
	}
}

// TestAttachTap puts a VM's device on the routed, the bridge and the
// macvtap path and checks it (a persistent tap with virtio-net headers,
// with an address or as a bridge port; a bridge-mode macvtap on the
// uplink with the guest's MAC; up), that the peer's packets for the guest
// reach it, that paths without VMs and paths not built are refused, and
// that Close takes the devices along.
func TestAttachTap(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	linksBefore := rootLinks(t)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{Routed, Bridge, Macvtap}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, p := range []Path{Direct, Veth} {
		if _, err := n.AttachTap("vm-"+string(p), p); !errors.Is(err, ErrPathNotForVMs) {
			t.Errorf("%s: tap attached or wrong error: %v", p, err)
		}
	}
	if _, err := n.AttachTap("vm-xdp", XDP); err == nil {
		t.Error("tap attached to a path the run did not build")
	}
	// A namespace guest first: the tap must take the path's next address.
	first, _, err := n.Attach("ns-guest", Routed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Path{Routed, Bridge, Macvtap} {
		link, err := n.AttachTap("vm-"+string(p), p)
		if err != nil {
			t.Fatal(err)
		}
		if p == Routed && (link.Addr == first.Addr || link.HostIf != "r1" || link.Gateway != link.HostIP.Addr()) {
			t.Errorf("routed tap link %+v collides with the namespace guest's %+v", link, first)
		}
		l, err := n.host.nl.LinkByName(link.HostIf)
		if err != nil {
			t.Fatalf("%s: device %s not in the host side: %v", p, link.HostIf, err)
		}
		if l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().HardwareAddr.String() != link.HostMAC.String() {
			t.Errorf("%s: device %s flags %v mac %s, want up with %s", p, link.HostIf, l.Attrs().Flags, l.Attrs().HardwareAddr, link.HostMAC)
		}
		if p == Macvtap {
			checkMacvtap(t, n, l, link)
		} else {
			tap, ok := l.(*netlink.Tuntap)
			if !ok || tap.Mode != netlink.TUNTAP_MODE_TAP || tap.NonPersist || tap.Flags&netlink.TUNTAP_VNET_HDR == 0 || tap.Flags&netlink.TUNTAP_NO_PI == 0 {
				t.Errorf("%s: %s is %T %+v, want a persistent tap with vnet headers and no PI", p, link.HostIf, l, l)
			}
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

// checkMacvtap checks a VM's macvtap: bridge mode, on its path's uplink,
// with the guest's own MAC, and opened as what it is.
func checkMacvtap(t *testing.T, n *Network, l netlink.Link, link Link) {
	t.Helper()
	up, err := n.host.nl.LinkByName(UplinkOf(link.Path).HostIf)
	if err != nil {
		t.Fatal(err)
	}
	mt, ok := l.(*netlink.Macvtap)
	if !ok || mt.Mode != netlink.MACVLAN_MODE_BRIDGE || mt.ParentIndex != up.Attrs().Index || mt.HardwareAddr.String() != link.MAC.String() {
		t.Errorf("%s is %T %+v, want a bridge-mode macvtap on %s with the guest's MAC %s", link.HostIf, l, l, up.Attrs().Name, link.MAC)
	}
	f, kind, err := OpenVMDevice(n.HostSide(), link.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if kind != VMMacvtap {
		t.Errorf("%s opened as a %s", link.HostIf, kind)
	}
}

// TestOpenVMDeviceRefusesOtherDevices: a VM's emulator must get the device
// it was meant to have, or a clear error, never a tap made on the spot.
func TestOpenVMDeviceRefusesOtherDevices(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: newLedger(t), Paths: []Path{Routed}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for name, want := range map[string]string{"up-routed": "veth device", "lo": "device", "nothere": "not found"} {
		if f, _, err := OpenVMDevice(n.HostSide(), name); err == nil || !strings.Contains(err.Error(), want) {
			if f != nil {
				f.Close()
			}
			t.Errorf("open %s: %v, want an error saying %q", name, err, want)
		}
	}
	if _, err := n.host.nl.LinkByName("nothere"); err == nil {
		t.Error("opening a missing device made one")
	}
}

// TestMacvtapOfItsOwnNamespace builds two runs' networks whose VMs'
// macvtaps have the same name and, namespaces being alike, the same
// ifindex: the kernel's /dev/tap<ifindex> can then only be one of them.
// Each opened device must be its own namespace's: a frame written into
// it leaves through that macvtap.
func TestMacvtapOfItsOwnNamespace(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	type vm struct {
		n    *Network
		link Link
	}
	var vms []vm
	for range 2 {
		n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: newLedger(t), Paths: []Path{Macvtap}})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		link, err := n.AttachTap("vm", Macvtap)
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm{n, link})
	}
	txPackets := func(v vm) uint64 {
		l, err := v.n.host.nl.LinkByName(v.link.HostIf)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Statistics.TxPackets
	}
	indexes := map[int]bool{}
	for _, v := range vms {
		l, err := v.n.host.nl.LinkByName(v.link.HostIf)
		if err != nil {
			t.Fatal(err)
		}
		indexes[l.Attrs().Index] = true
	}
	if len(indexes) != 1 {
		t.Logf("the macvtaps' ifindexes differ (%v): the names in /dev do not collide this time", indexes)
	}
	// Enough frames to stand out from what the host sides send on their
	// own (IPv6 neighbour discovery on new links).
	const frames = 20
	for i, v := range vms {
		other := vms[1-i]
		f := openTapIn(t, v.n.host, v.link.HostIf)
		mine, theirs := txPackets(v), txPackets(other)
		frame := append(make([]byte, vnetHdrLen), arpFrame(1, v.link.MAC, v.link.Addr.Addr(), nil, v.link.Peer)...)
		for range frames {
			if _, err := f.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		if txPackets(v)-mine < frames || txPackets(other)-theirs >= frames {
			t.Errorf("network %d: %d frames written into its macvtap: tx %d->%d there, %d->%d on the other network's",
				i, frames, mine, txPackets(v), theirs, txPackets(other))
		}
	}
}
