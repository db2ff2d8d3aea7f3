package netpath

import "github.com/vishvananda/netlink"

// Veth puts a guest on a veth pair whose other end is in the peer: no host
// side at all, the floor a guest's own isolation sits on.
const Veth Path = "veth"

func init() { Register(veth{}) }

type veth struct{}

func (veth) Spec() Spec {
	return Spec{Name: Veth, Index: 6, Layout: LayoutPeerLinks, IfPrefix: "v",
		NoVMs:    "a VM's NIC is a tap, which has no far end to put in the peer",
		NoUplink: "its guests' links end in the peer itself, with no uplink to replace"}
}

func (veth) Build(sides Sides) (Live, error) { return vethLive{sides: sides}, nil }

type vethLive struct {
	quiet
	sides Sides
}

func (v vethLive) AttachNamespace(gns *namespace, link Link) error {
	if err := vethPair(v.sides.Peer, link.HostIf, link.HostMAC, gns, GuestIfName, link.MAC, nil); err != nil {
		return err
	}
	return addAddr(v.sides.Peer.nl, link.HostIf, link.HostIP)
}

func (vethLive) AttachTap(netlink.Link, Link) error { return notForVMs(Veth) }
