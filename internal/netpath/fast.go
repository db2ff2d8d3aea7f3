package netpath

import (
	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/netpath/fastpath"
)

// XDP and TC are our own eBPF fast paths (package fastpath) on the routed
// layout: their programs move packets between a guest's veth or a VM's tap
// and the uplink, bypassing the host side's IP forwarding, and hand the
// stack whatever they cannot forward themselves.
const (
	XDP Path = "xdp"
	TC  Path = "tc"
)

func init() {
	Register(fast{Spec{Name: XDP, Index: 2, Layout: LayoutRouted, IfPrefix: "x",
		VMOffloadsOff: "the XDP program on the tap sees a frame whole only when it is neither a GSO frame nor " +
			"left with a partial checksum, and a frame it redirects carries no checksum state"}})
	Register(fast{Spec{Name: TC, Index: 3, Layout: LayoutRouted, IfPrefix: "t"}})
}

type fast struct{ spec Spec }

func (f fast) Spec() Spec { return f.spec }

func (f fast) Build(sides Sides) (Live, error) {
	if err := buildUplink(sides, f.spec, nil); err != nil {
		return nil, err
	}
	set, err := fastpath.Load(fastpath.Mode(f.spec.Name))
	if err != nil {
		return nil, err
	}
	live := &fastLive{routedLive: routedLive{sides: sides}, set: set, spec: f.spec}
	// A NIC's far end is another machine's: only its own end is hooked.
	if sides.takesNIC(f.spec) {
		return live, set.AttachNIC(sides.Host.handle, sides.NIC)
	}
	u := f.spec.uplink()
	return live, set.Attach(sides.Host.handle, u.HostIf, sides.Peer.handle, u.PeerIf)
}

type fastLive struct {
	routedLive
	set  *fastpath.Set
	spec Spec
	taps int
}

func (f *fastLive) AttachNamespace(gns *namespace, link Link) error {
	if err := f.routedLive.AttachNamespace(gns, link); err != nil {
		return err
	}
	return f.set.Attach(f.sides.Host.handle, link.HostIf, gns.handle, GuestIfName)
}

// AttachTap gives the tap the guest's gateway address, as on routed, and
// the path's program: the tap has no far end the path could prepare, so
// what the VM's NIC must do is Spec.VMOffloadsOff's to say.
func (f *fastLive) AttachTap(tap netlink.Link, link Link) error {
	if err := f.routedLive.AttachTap(tap, link); err != nil {
		return err
	}
	if err := f.set.AttachTap(f.sides.Host.handle, link.HostIf); err != nil {
		return err
	}
	f.taps++
	return nil
}

func (f *fastLive) Counters() (fastpath.Counters, error) { return f.set.Counters() }

func (f *fastLive) Describe() map[string]string {
	d := f.set.Describe()
	if c, err := f.set.Counters(); err == nil {
		d["counters"] = formatCounters(c)
	}
	if f.taps > 0 && f.spec.VMOffloadsOff != "" {
		d["vm_nic.offload"] = "checksum and segmentation offloads off on the VMs' NICs, because " + f.spec.VMOffloadsOff
	}
	return d
}

func (f *fastLive) Close() error { return f.set.Close() }
