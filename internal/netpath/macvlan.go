package netpath

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Macvlan: guests on macvlan (bridge mode) children of the uplink veth.
const Macvlan Path = "macvlan"

func init() { Register(macvlan{}) }

type macvlan struct{}

func (macvlan) Spec() Spec {
	return Spec{Name: Macvlan, Index: 5, Layout: LayoutSwitched,
		NoVMs: "a VM would need a macvtap, which is not built yet"}
}

func (m macvlan) Build(sides Sides) (Live, error) {
	return macvlanLive{sides: sides}, buildUplink(sides, m.Spec(), nil)
}

type macvlanLive struct {
	quiet
	sides Sides
}

func (m macvlanLive) AttachNamespace(gns *namespace, link Link) error {
	parent, err := m.sides.Host.nl.LinkByName(UplinkOf(Macvlan).HostIf)
	if err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.HardwareAddr, attrs.ParentIndex = GuestIfName, link.MAC, parent.Attrs().Index
	attrs.Namespace = netlink.NsFd(int(gns.handle))
	if err := m.sides.Host.nl.LinkAdd(&netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}); err != nil {
		return fmt.Errorf("macvlan on %s: %w", parent.Attrs().Name, err)
	}
	return setUp(gns.nl, GuestIfName)
}

func (macvlanLive) AttachTap(netlink.Link, Link) error { return notForVMs(Macvlan) }

// notForVMs is the error of a path's AttachTap that takes no VMs; the
// scenario refuses such a VM before, through CheckVMPath.
func notForVMs(p Path) error { return CheckVMPath(p) }
