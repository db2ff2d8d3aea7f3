package fastpath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// nsKey identifies a network namespace by its nsfs inode, the same
// namespace whatever handle the caller opened it with.
type nsKey struct{ dev, ino uint64 }

func keyOf(ns netns.NsHandle) (nsKey, error) {
	if !ns.IsOpen() {
		return nsKey{}, errors.New("network namespace handle is not open")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return nsKey{}, fmt.Errorf("stat network namespace handle %d: %w", int(ns), err)
	}
	return nsKey{dev: st.Dev, ino: st.Ino}, nil
}

// space is a namespace the Set works in. Its sockets were created inside
// it, so every call through them acts there whatever namespace the calling
// thread is in; only the device map update needs a thread inside (see do),
// and that is a thread of its own, never the caller's. The sockets and the
// handle keep the namespace alive until Close, which is what lets Close
// detach.
type space struct {
	key nsKey
	// ns is our own handle, for the one thing sockets cannot do: see do.
	ns netns.NsHandle
	nl *netlink.Handle
	// raw is a route socket of our own. The netlink package has no
	// per-handle XDP attach, so XDP is set with requests sent on it; it
	// also carries the ethtool ioctls, which the kernel runs in the
	// socket's namespace.
	raw *nl.NetlinkSocket
}

func openSpace(ns netns.NsHandle, key nsKey) (*space, error) {
	fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the handle of network namespace %d: %w", key.ino, err)
	}
	own := netns.NsHandle(fd)
	h, err := netlink.NewHandleAt(own, unix.NETLINK_ROUTE)
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("open netlink in network namespace %d: %w", key.ino, err)
	}
	raw, err := nl.GetNetlinkSocketAt(own, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		own.Close()
		return nil, fmt.Errorf("open a route socket in network namespace %d: %w", key.ino, err)
	}
	// Replies come from the kernel at once; the timeouts only bound a
	// wedged socket. Extended acks put the kernel's reason into errors.
	timeout := unix.Timeval{Sec: 10}
	for _, set := range []func() error{
		func() error { return raw.SetSendTimeout(&timeout) },
		func() error { return raw.SetReceiveTimeout(&timeout) },
		func() error { return raw.SetExtAck(true) },
	} {
		if err := set(); err != nil {
			raw.Close()
			h.Close()
			own.Close()
			return nil, fmt.Errorf("configure the route socket in network namespace %d: %w", key.ino, err)
		}
	}
	return &space{key: key, ns: own, nl: h, raw: raw}, nil
}

func (sp *space) close() {
	sp.raw.Close()
	sp.nl.Close()
	sp.ns.Close()
}

// do runs fn on a thread inside the namespace. The kernel resolves the
// ifindex of a device map entry in the namespace of the thread updating
// the map, so the XDP egress map must be filled from in there: updated
// from anywhere else, the same numbers would name devices of the caller's
// namespace.
func (sp *space) do(fn func() error) error {
	if err := nsthread.Do(sp.ns, fn); err != nil {
		return fmt.Errorf("network namespace %d: %w", sp.key.ino, err)
	}
	return nil
}

// setXDP attaches the program fd (or detaches, with fd -1) on ifindex in
// the space's namespace: the RTM_SETLINK request `ip link set xdpdrv`
// sends, executed on the space's own socket.
func (sp *space) setXDP(ifindex, fd int, flags uint32) error {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   uint32(unix.SizeofNlMsghdr),
			Type:  unix.RTM_SETLINK,
			Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK,
		},
		Sockets: map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sp.raw}},
	}
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	xdp := nl.NewRtAttr(unix.IFLA_XDP|unix.NLA_F_NESTED, nil)
	xdp.AddRtAttr(nl.IFLA_XDP_FD, nl.Uint32Attr(uint32(int32(fd))))
	if flags != 0 {
		xdp.AddRtAttr(nl.IFLA_XDP_FLAGS, nl.Uint32Attr(flags))
	}
	req.AddData(xdp)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// attachedXDP reports the id and mode of the XDP program on ifindex, as
// the kernel says; id 0 when there is none.
func (sp *space) attachedXDP(ifindex int) (ebpf.ProgramID, uint32, error) {
	link, err := sp.nl.LinkByIndex(ifindex)
	if err != nil {
		return 0, 0, err
	}
	x := link.Attrs().Xdp
	if x == nil || !x.Attached {
		return 0, 0, nil
	}
	return ebpf.ProgramID(x.ProgId), x.AttachMode, nil
}

// ethtool runs fn with a socket fd whose namespace is the space's.
func (sp *space) ethtool(fn func(fd int) error) error { return fn(sp.raw.GetFd()) }

// isGone says whether err means the link (or its namespace) no longer
// exists, which Close accepts: deleting a link detaches its programs.
func isGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

// The netdev generic netlink family's names for what xdpTransmits asks
// (include/uapi/linux/netdev.h).
const (
	netdevCmdDevGet       = 1
	netdevAttrIfindex     = 1
	netdevAttrXDPFeatures = 3
	netdevXDPActNdoXmit   = 1 << 2
)

// xdpTransmits says whether the device's driver now transmits frames an
// XDP program redirects to it (ndo_xdp_xmit), as the kernel's netdev
// family reports: a redirect to a device that cannot is dropped, unseen by
// the program that made it. A veth can only while its far end has NAPI
// (GRO, or an XDP program).
func (sp *space) xdpTransmits(ifindex int) (bool, error) {
	gh, err := netlink.NewHandleAt(sp.ns, unix.NETLINK_GENERIC)
	if err != nil {
		return false, fmt.Errorf("open generic netlink: %w", err)
	}
	defer gh.Close()
	fam, err := gh.GenlFamilyGet("netdev")
	if err != nil {
		return false, fmt.Errorf("the kernel's netdev family: %w", err)
	}
	sock, err := nl.GetNetlinkSocketAt(sp.ns, netns.None(), unix.NETLINK_GENERIC)
	if err != nil {
		return false, fmt.Errorf("open generic netlink: %w", err)
	}
	defer sock.Close()
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr), Type: fam.ID, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK},
		Sockets:  map[int]*nl.SocketHandle{unix.NETLINK_GENERIC: {Socket: sock}},
	}
	req.AddData(&nl.Genlmsg{Command: netdevCmdDevGet, Version: 1})
	req.AddData(nl.NewRtAttr(netdevAttrIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return false, fmt.Errorf("xdp features of ifindex %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return false, fmt.Errorf("xdp features of ifindex %d: %w", ifindex, err)
		}
		for _, a := range attrs {
			if a.Attr.Type == netdevAttrXDPFeatures && len(a.Value) == 8 {
				return nl.NativeEndian().Uint64(a.Value)&netdevXDPActNdoXmit != 0, nil
			}
		}
	}
	return false, fmt.Errorf("xdp features of ifindex %d: the kernel's reply has none", ifindex)
}
