package netpath

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Bridge: guest veths (or a VM's tap) and an uplink on a Linux bridge.
const Bridge Path = "bridge"

func init() { Register(bridge{}) }

const bridgeName = "br0"

type bridge struct{}

func (bridge) Spec() Spec {
	return Spec{Name: Bridge, Index: 4, Layout: LayoutSwitched, IfPrefix: "b"}
}

func (b bridge) Build(sides Sides) (Live, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = bridgeName
	br := &netlink.Bridge{LinkAttrs: attrs}
	if err := sides.Host.nl.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridgeName, err)
	}
	if err := setUp(sides.Host.nl, bridgeName); err != nil {
		return nil, err
	}
	return bridgeLive{sides: sides, br: br}, buildUplink(sides, b.Spec(), br)
}

type bridgeLive struct {
	quiet
	sides Sides
	br    netlink.Link
}

func (b bridgeLive) AttachNamespace(gns *namespace, link Link) error {
	return vethPair(b.sides.Host, link.HostIf, link.HostMAC, gns, GuestIfName, link.MAC, b.br)
}

func (b bridgeLive) AttachTap(tap netlink.Link, link Link) error {
	if err := b.sides.Host.nl.LinkSetMaster(tap, b.br); err != nil {
		return fmt.Errorf("enslave tap %s to %s: %w", link.HostIf, bridgeName, err)
	}
	return nil
}
