package netpath

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
)

// Path names a data path between guests and the peer; what it does is its
// registered DataPath's.
type Path string

// MaxGuestsPerPath is how many guests one path's subnet holds: a /19 per
// path, cut into /30 links for routed paths.
const MaxGuestsPerPath = 2000

var (
	guestRange = netip.MustParsePrefix("198.18.0.0/16") // a /19 per path, for indexes 0 to 7
	linkRange  = netip.MustParsePrefix("198.19.0.0/17") // a /24 per uplink
	// moreGuests continues guestRange above the uplinks, for indexes 8 to
	// maxPathIndex.
	moreGuests = netip.MustParsePrefix("198.19.128.0/17")
)

// maxPathIndex is the largest Spec.Index the plan has a /19 for.
const maxPathIndex = 11

func addrAdd(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(n)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// block is the /19 of guest addresses of a path.
func (s Spec) block() netip.Prefix {
	const inGuestRange = 1 << (19 - 16)
	if s.Index < inGuestRange {
		return netip.PrefixFrom(addrAdd(guestRange.Addr(), s.Index<<13), 19)
	}
	return netip.PrefixFrom(addrAdd(moreGuests.Addr(), (s.Index-inGuestRange)<<13), 19)
}

// Uplink is the addressing of one path's link between host side and peer.
type Uplink struct {
	HostIf, PeerIf string       // interface names in the host side and in the peer
	Host, Peer     netip.Prefix // addresses with their prefix length
	// Routes are the subnets the peer reaches through this uplink's host
	// side (the routed guests' block); empty for switched paths, and for
	// a NAT path, whose guests the peer never sees.
	Routes []netip.Prefix
}

// UplinkOf returns where a path's traffic enters the peer.
func UplinkOf(p Path) Uplink { return specOf(p).uplink() }

func (s Spec) uplink() Uplink {
	u := Uplink{HostIf: "up-" + string(s.Name), PeerIf: "pp-" + string(s.Name)}
	if s.Layout == LayoutSwitched {
		// Guests, the host side and the peer share the path's /19.
		b := s.block()
		u.Host = netip.PrefixFrom(addrAdd(b.Addr(), 1), b.Bits())
		u.Peer = netip.PrefixFrom(addrAdd(b.Addr(), 2), b.Bits())
		return u
	}
	net24 := addrAdd(linkRange.Addr(), s.Index<<8)
	u.Host = netip.PrefixFrom(addrAdd(net24, 1), 24)
	u.Peer = netip.PrefixFrom(addrAdd(net24, 2), 24)
	if !s.Baseline && s.Layout != LayoutNAT {
		u.Routes = []netip.Prefix{s.block()}
	}
	return u
}

// Link is the addressing of one guest's interface on a path.
type Link struct {
	Path Path
	// HostIf is the far end of the guest's link: in the host side, or in
	// the peer for the veth path; "" for a namespace guest on macvlan or
	// macvtap (no device of its own), a VM's macvtap there; for a VM on a
	// path whose VMDevice is VMPasst, the path of passt's socket; for
	// VMVFIO, the PCI address of the device lent to the VM.
	HostIf  string
	Addr    netip.Prefix // the guest's address on eth0
	Gateway netip.Addr   // the guest's default route, invalid for switched paths
	HostIP  netip.Prefix // the address of HostIf, routed and peer-link paths only; a NAT path's user-mode stack's
	Peer    netip.Addr   // the peer as the guest reaches it
	MAC     net.HardwareAddr
	HostMAC net.HardwareAddr // of HostIf
	// OffloadsOff, for a VM's link (AttachTap), is why its NIC's checksum
	// and segmentation offloads must be off (Spec.VMOffloadsOff).
	OffloadsOff string
}

// GuestIfName is the guest's interface name inside its namespace.
const GuestIfName = "eth0"

// LinkOf returns the addressing of the n-th guest (0-based, counted per
// path) on path p.
func LinkOf(p Path, n int) (Link, error) {
	d, err := lookup(p)
	if err != nil {
		return Link{}, err
	}
	s := d.Spec()
	if s.Baseline {
		return Link{}, fmt.Errorf("path %q has no guests", p)
	}
	if n < 0 || n >= MaxGuestsPerPath {
		return Link{}, fmt.Errorf("path %s holds at most %d guests", p, MaxGuestsPerPath)
	}
	l := Link{Path: p, MAC: s.mac(n, 1)}
	if s.IfPrefix != "" {
		l.HostIf = fmt.Sprintf("%s%d", s.IfPrefix, n)
		l.HostMAC = s.mac(n, 2)
	}
	b := s.block()
	if s.Layout == LayoutSwitched {
		// .1 and .2 are the host side and the peer; guests start at .16.
		l.Addr = netip.PrefixFrom(addrAdd(b.Addr(), 16+n), b.Bits())
		l.Peer = s.uplink().Peer.Addr()
		return l, nil
	}
	base := addrAdd(b.Addr(), 4*n)
	l.HostIP = netip.PrefixFrom(addrAdd(base, 1), 30)
	l.Gateway = l.HostIP.Addr()
	l.Addr = netip.PrefixFrom(addrAdd(base, 2), 30)
	l.Peer = s.uplink().Peer.Addr()
	if s.Layout == LayoutPeerLinks {
		// The far end is the peer's own interface: the guest reaches the
		// peer at the address across its /30.
		l.Peer = l.HostIP.Addr()
	}
	return l, nil
}

// mac derives a locally administered unicast address from the path, the
// guest and which end of the link it is (1 guest, 2 host side).
func (s Spec) mac(n, end int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x76, byte(s.Index), byte(n >> 8), byte(n), byte(end)}
}
