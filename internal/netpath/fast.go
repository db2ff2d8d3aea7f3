package netpath

import (
	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/netpath/fastpath"
)

// XDP and TC are our own eBPF fast paths (package fastpath) on the routed
// layout: their programs move packets between a guest's veth and the
// uplink, bypassing the host side's IP forwarding, and hand the stack
// whatever they cannot forward themselves.
const (
	XDP Path = "xdp"
	TC  Path = "tc"
)

func init() {
	Register(fast{Spec{Name: XDP, Index: 2, Layout: LayoutRouted, IfPrefix: "x", NoVMs: "its programs attach to veth pairs, not to a tap yet"}})
	Register(fast{Spec{Name: TC, Index: 3, Layout: LayoutRouted, IfPrefix: "t", NoVMs: "its programs attach to veth pairs, not to a tap yet"}})
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
	live := &fastLive{routedLive: routedLive{sides: sides}, set: set, path: f.spec.Name}
	u := f.spec.uplink()
	if err := set.Attach(sides.Host.handle, u.HostIf, sides.Peer.handle, u.PeerIf); err != nil {
		return live, err
	}
	return live, nil
}

type fastLive struct {
	routedLive
	set  *fastpath.Set
	path Path
}

func (f *fastLive) AttachNamespace(gns *namespace, link Link) error {
	if err := f.routedLive.AttachNamespace(gns, link); err != nil {
		return err
	}
	return f.set.Attach(f.sides.Host.handle, link.HostIf, gns.handle, GuestIfName)
}

func (f *fastLive) AttachTap(netlink.Link, Link) error { return notForVMs(f.path) }

func (f *fastLive) Counters() (fastpath.Counters, error) { return f.set.Counters() }

func (f *fastLive) Describe() map[string]string {
	d := f.set.Describe()
	if c, err := f.set.Counters(); err == nil {
		d["counters"] = formatCounters(c)
	}
	return d
}

func (f *fastLive) Close() error { return f.set.Close() }
