package netpath

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Macvlan and Macvtap: guests on macvlan (bridge mode) children of the
// uplink veth, a VM on a macvtap, the macvlan child with a character
// device that hands its frames to the VM's emulator. The two are one
// implementation on two uplinks, so that a scenario can name the path as
// users name it: macvlan for containers, macvtap for VMs.
const (
	Macvlan Path = "macvlan"
	Macvtap Path = "macvtap"
)

func init() {
	Register(macvlan{Spec{Name: Macvlan, Index: 5, Layout: LayoutSwitched, VMDevice: VMMacvtap}})
	Register(macvlan{Spec{Name: Macvtap, Index: 7, Layout: LayoutSwitched, VMDevice: VMMacvtap}})
}

type macvlan struct{ spec Spec }

func (m macvlan) Spec() Spec { return m.spec }

func (m macvlan) Build(sides Sides) (Live, error) {
	return macvlanLive{sides: sides, uplink: sides.uplinkIf(m.spec)}, buildUplink(sides, m.spec, nil)
}

type macvlanLive struct {
	quiet
	sides  Sides
	uplink string // the host end every child hangs off
}

func (m macvlanLive) AttachNamespace(gns *namespace, link Link) error {
	parent, err := m.sides.Host.nl.LinkByName(m.uplink)
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

// AttachTap has nothing to do: a macvtap is born on the uplink.
func (macvlanLive) AttachTap(netlink.Link, Link) error { return nil }

func (m macvlanLive) Describe() map[string]string {
	return map[string]string{"vm_device": "macvtap in bridge mode on " + m.uplink + ", with the guest's MAC"}
}

// notForVMs is the error of a path's AttachTap that takes no VMs; the
// scenario refuses such a VM before, through CheckVMPath.
func notForVMs(p Path) error { return CheckVMPath(p) }
