package netpath

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Path is a data path between guests and the peer.
type Path string

const (
	Direct  Path = "direct"
	Bridge  Path = "bridge"
	Routed  Path = "routed"
	Macvlan Path = "macvlan"
	XDP     Path = "xdp"
	TC      Path = "tc"
	// Veth puts a guest on a veth pair whose other end is in the peer:
	// no host side at all, the floor a guest's own isolation sits on.
	Veth Path = "veth"
)

// GuestPaths are the paths a scenario may put guests on. Direct is the
// host side's own link and belongs to the baseline alone.
var GuestPaths = []Path{Bridge, Routed, Macvlan, XDP, TC, Veth}

// index numbers each path's uplink and subnet; it is part of every address,
// so it must never change for an existing path.
func (p Path) index() int {
	switch p {
	case Direct:
		return 0
	case Routed:
		return 1
	case XDP:
		return 2
	case TC:
		return 3
	case Bridge:
		return 4
	case Macvlan:
		return 5
	case Veth:
		return 6
	}
	return -1
}

// ParsePath checks a scenario's path name.
func ParsePath(s string) (Path, error) {
	for _, p := range GuestPaths {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(GuestPaths))
	for i, p := range GuestPaths {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown network path %q (allowed: %s)", s, strings.Join(names, ", "))
}

// switched paths put guests and the peer on one layer-2 segment; the others
// give each guest a point-to-point link the host side routes.
func (p Path) switched() bool { return p == Bridge || p == Macvlan }

// fast reports whether the path is one of our eBPF fast paths.
func (p Path) fast() bool { return p == XDP || p == TC }

// MaxGuestsPerPath is how many guests one path's subnet holds: a /19 per
// path, cut into /30 links for routed paths.
const MaxGuestsPerPath = 2000

var (
	guestRange = netip.MustParsePrefix("198.18.0.0/16") // a /19 per path
	linkRange  = netip.MustParsePrefix("198.19.0.0/16") // a /24 per uplink
)

func addrAdd(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(n)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// pathBlock is the /19 of guest addresses of a path.
func (p Path) pathBlock() netip.Prefix {
	return netip.PrefixFrom(addrAdd(guestRange.Addr(), p.index()<<13), 19)
}

// Uplink is the addressing of one path's link between host side and peer.
type Uplink struct {
	HostIf, PeerIf string       // interface names in the host side and in the peer
	Host, Peer     netip.Prefix // addresses with their prefix length
	// Routes are the subnets the peer reaches through this uplink's host
	// side (the routed guests' block); empty for switched paths.
	Routes []netip.Prefix
}

// hasUplink reports whether the path reaches the peer through an uplink
// from the host side; a veth guest's link ends in the peer itself.
func (p Path) hasUplink() bool { return p != Veth }

// UplinkOf returns where a path's traffic enters the peer.
func UplinkOf(p Path) Uplink {
	u := Uplink{HostIf: "up-" + string(p), PeerIf: "pp-" + string(p)}
	if p.switched() {
		// Guests, the host side and the peer share the path's /19.
		b := p.pathBlock()
		u.Host = netip.PrefixFrom(addrAdd(b.Addr(), 1), b.Bits())
		u.Peer = netip.PrefixFrom(addrAdd(b.Addr(), 2), b.Bits())
		return u
	}
	net24 := addrAdd(linkRange.Addr(), p.index()<<8)
	u.Host = netip.PrefixFrom(addrAdd(net24, 1), 24)
	u.Peer = netip.PrefixFrom(addrAdd(net24, 2), 24)
	if p != Direct {
		u.Routes = []netip.Prefix{p.pathBlock()}
	}
	return u
}

// Link is the addressing of one guest's interface on a path.
type Link struct {
	Path Path
	// HostIf is the far end of the guest's link: in the host side, or in
	// the peer for the veth path; "" for macvlan (no device of its own).
	HostIf  string
	Addr    netip.Prefix // the guest's address on eth0
	Gateway netip.Addr   // the guest's default route, invalid for switched paths
	HostIP  netip.Prefix // the host side's address on HostIf, routed paths only
	Peer    netip.Addr   // the peer as the guest reaches it
	MAC     net.HardwareAddr
	HostMAC net.HardwareAddr // of HostIf
}

// GuestIfName is the guest's interface name inside its namespace.
const GuestIfName = "eth0"

// LinkOf returns the addressing of the n-th guest (0-based, counted per
// path) on path p.
func LinkOf(p Path, n int) (Link, error) {
	if p.index() <= 0 {
		return Link{}, fmt.Errorf("path %q has no guests", p)
	}
	if n < 0 || n >= MaxGuestsPerPath {
		return Link{}, fmt.Errorf("path %s holds at most %d guests", p, MaxGuestsPerPath)
	}
	up := UplinkOf(p)
	l := Link{Path: p, Peer: up.Peer.Addr(), MAC: mac(p, n, 1)}
	b := p.pathBlock()
	if p.switched() {
		// .1 and .2 are the host side and the peer; guests start at .16.
		l.Addr = netip.PrefixFrom(addrAdd(b.Addr(), 16+n), b.Bits())
		if p == Bridge {
			l.HostIf = fmt.Sprintf("b%d", n)
			l.HostMAC = mac(p, n, 2)
		}
		return l, nil
	}
	base := addrAdd(b.Addr(), 4*n)
	l.HostIf = fmt.Sprintf("%s%d", p.ifPrefix(), n)
	l.HostIP = netip.PrefixFrom(addrAdd(base, 1), 30)
	l.Gateway = l.HostIP.Addr()
	l.Addr = netip.PrefixFrom(addrAdd(base, 2), 30)
	l.HostMAC = mac(p, n, 2)
	if p == Veth {
		// The far end is the peer's own interface: the guest reaches the
		// peer at the address across its /30.
		l.Peer = l.HostIP.Addr()
	}
	return l, nil
}

func (p Path) ifPrefix() string {
	switch p {
	case XDP:
		return "x"
	case TC:
		return "t"
	case Veth:
		return "v"
	}
	return "r"
}

// mac derives a locally administered unicast address from the path, the
// guest and which end of the link it is (1 guest, 2 host side).
func mac(p Path, n, end int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x76, byte(p.index()), byte(n >> 8), byte(n), byte(end)}
}
