package netpath

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Routed: the host side forwards IP between guest and peer subnets.
const Routed Path = "routed"

func init() { Register(routed{}) }

type routed struct{}

func (routed) Spec() Spec {
	return Spec{Name: Routed, Index: 1, Layout: LayoutRouted, IfPrefix: "r"}
}

func (r routed) Build(sides Sides) (Live, error) {
	return routedLive{sides: sides}, buildUplink(sides, r.Spec(), nil)
}

// routedLive puts each guest on a veth whose host end, in the host side,
// is its gateway.
type routedLive struct {
	quiet
	sides Sides
}

func (r routedLive) AttachNamespace(gns *namespace, link Link) error {
	if err := vethPair(r.sides.Host, link.HostIf, link.HostMAC, gns, GuestIfName, link.MAC, nil); err != nil {
		return err
	}
	return addAddr(r.sides.Host.nl, link.HostIf, link.HostIP)
}

func (r routedLive) AttachTap(tap netlink.Link, link Link) error {
	if err := r.sides.Host.nl.AddrAdd(tap, &netlink.Addr{IPNet: ipNet(link.HostIP)}); err != nil {
		return fmt.Errorf("address %s on tap %s: %w", link.HostIP, link.HostIf, err)
	}
	return nil
}
