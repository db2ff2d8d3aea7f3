package netpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
)

// A dedicated NIC (Options.Uplink) replaces the uplink veth of the run's
// one guest path: it is moved into the host side for the run and put back
// into the host's namespace, as it was, when the network closes or when
// `vfleet clean` undoes its ledger entry after a crash.

// kindUplinkNIC is the ledger kind of a dedicated NIC lent to a run: its
// ID is the NIC's name, its data the state it is put back to.
const kindUplinkNIC = "uplink-nic"

func init() { ledger.RegisterUndo(kindUplinkNIC, undoUplinkNIC) }

// ErrUplinkRefused is wrapped by the error for a NIC vfleet will not take
// from the host: the wrapping error names the NIC and why.
var ErrUplinkRefused = errors.New("NIC refused as the data paths' uplink")

// ErrUplinkPath is wrapped by the error for a run whose paths cannot all
// sit on a dedicated NIC.
var ErrUplinkPath = errors.New("a dedicated NIC cannot go under these paths")

// nicState is what vfleet changes on a NIC it borrows, recorded before it
// changes anything. Moving a NIC into another namespace takes it down and
// drops its addresses and routes, so those are recorded too.
type nicState struct {
	Up      bool           `json:"up"`
	MTU     int            `json:"mtu"`
	Promisc bool           `json:"promisc"`
	Addrs   []netip.Prefix `json:"addrs,omitempty"`
	// Routes are the main table's routes through the NIC that its
	// addresses do not bring back by themselves (static ones).
	Routes []nicRoute `json:"routes,omitempty"`
	// XDP is the id of the XDP program attached when it was recorded, 0
	// for none: a program found later is detached, one recorded is left.
	XDP uint32 `json:"xdp,omitempty"`
}

// nicRoute is a static route through the NIC.
type nicRoute struct {
	Dst netip.Prefix `json:"dst"`
	Gw  netip.Addr   `json:"gw,omitzero"`
	Src netip.Addr   `json:"src,omitzero"`
	// Priority is the route's metric.
	Priority int `json:"priority,omitempty"`
}

// nicOps changes one NIC; restoreNIC decides what to change.
type nicOps interface {
	SetUp(up bool) error
	SetMTU(mtu int) error
	SetPromisc(on bool) error
	AddAddr(p netip.Prefix) error
	DelAddr(p netip.Prefix) error
	AddRoute(r nicRoute) error
	DetachXDP() error
}

// restoreNIC puts a NIC back from have to want. A NIC that differs goes
// down first, so that nothing is sent with half its old state, and up
// last if it was; one as recorded is left alone.
func restoreNIC(ops nicOps, want, have nicState) error {
	if reflect.DeepEqual(want, have) {
		return nil
	}
	var errs []error
	try := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if have.Up {
		try(ops.SetUp(false))
	}
	if have.XDP != 0 && have.XDP != want.XDP {
		try(ops.DetachXDP())
	}
	if have.MTU != want.MTU && want.MTU > 0 {
		try(ops.SetMTU(want.MTU))
	}
	if have.Promisc != want.Promisc {
		try(ops.SetPromisc(want.Promisc))
	}
	for _, p := range have.Addrs {
		if !slices.Contains(want.Addrs, p) {
			try(ops.DelAddr(p))
		}
	}
	for _, p := range want.Addrs {
		if !slices.Contains(have.Addrs, p) {
			try(ops.AddAddr(p))
		}
	}
	if want.Up {
		try(ops.SetUp(true))
	}
	// A route needs its NIC up and its gateway reachable: after the
	// addresses and the state.
	for _, r := range want.Routes {
		if !slices.Contains(have.Routes, r) {
			try(ops.AddRoute(r))
		}
	}
	return errors.Join(errs...)
}

// uplinkFacts is what the refusals look at, read from the host's namespace.
type uplinkFacts struct {
	NIC   string
	Index int
	Addrs []netip.Addr
	// DefaultVia are the links default routes leave by, nexthops
	// included; Management the default routes' source addresses.
	DefaultVia []int
	Management []netip.Addr
	// Peer is the remote peer's address, invalid when the peer is local;
	// PeerVia the link the route to it leaves by.
	Peer    netip.Addr
	PeerVia int
}

// refusal says why the NIC must not be taken from the host, nil when it may.
func (f uplinkFacts) refusal() error {
	var why []string
	if slices.Contains(f.DefaultVia, f.Index) {
		why = append(why, "it carries the host's default route")
	}
	for _, a := range f.Management {
		if slices.Contains(f.Addrs, a) {
			why = append(why, fmt.Sprintf("it holds %s, the host's management address (the source of its default route)", a))
		}
	}
	if f.Peer.IsValid() && f.PeerVia == f.Index {
		why = append(why, fmt.Sprintf("the SSH session to the peer %s leaves by it", f.Peer))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s; moving it into the run's namespace would cut the host off", ErrUplinkRefused, f.NIC, strings.Join(why, ", and "))
}

// CheckUplink refuses a NIC that carries the default route, the host's
// management address or the route to the remote peer (peer, invalid
// for a local one), before anything is built.
func CheckUplink(nic string, peer netip.Addr) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("uplink %s: %w", nic, err)
	}
	defer h.Close()
	return checkUplinkIn(h, nic, peer)
}

func checkUplinkIn(h *netlink.Handle, nic string, peer netip.Addr) error {
	f, err := readUplinkFacts(h, nic, peer)
	if err != nil {
		return err
	}
	return f.refusal()
}

func readUplinkFacts(h *netlink.Handle, nic string, peer netip.Addr) (uplinkFacts, error) {
	l, err := h.LinkByName(nic)
	if err != nil {
		return uplinkFacts{}, fmt.Errorf("uplink %s: %w", nic, err)
	}
	f := uplinkFacts{NIC: nic, Index: l.Attrs().Index, Peer: peer}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return f, fmt.Errorf("uplink %s: addresses: %w", nic, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			f.Addrs = append(f.Addrs, ip.Unmap())
		}
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return f, fmt.Errorf("uplink %s: routes: %w", nic, err)
		}
		for _, r := range routes {
			if r.Dst != nil && !isDefault(r.Dst) {
				continue
			}
			via := []int{r.LinkIndex}
			for _, hop := range r.MultiPath {
				via = append(via, hop.LinkIndex)
			}
			f.DefaultVia = append(f.DefaultVia, via...)
			if src, ok := managementSource(h, r); ok {
				f.Management = append(f.Management, src)
			}
		}
	}
	if peer.IsValid() {
		routes, err := h.RouteGet(net.IP(peer.AsSlice()))
		if err != nil {
			return f, fmt.Errorf("uplink %s: route to the peer %s: %w", nic, peer, err)
		}
		if len(routes) > 0 {
			f.PeerVia = routes[0].LinkIndex
		}
	}
	return f, nil
}

func isDefault(dst *net.IPNet) bool {
	ones, _ := dst.Mask.Size()
	return ones == 0
}

// managementSource is the address the host's default route sends from:
// its own preferred source, else the one the kernel picks to reach its
// gateway.
func managementSource(h *netlink.Handle, r netlink.Route) (netip.Addr, bool) {
	if src, ok := netip.AddrFromSlice(r.Src); ok && src.IsValid() && !src.IsUnspecified() {
		return src.Unmap(), true
	}
	if r.Gw == nil {
		return netip.Addr{}, false
	}
	got, err := h.RouteGet(r.Gw)
	if err != nil || len(got) == 0 {
		return netip.Addr{}, false
	}
	src, ok := netip.AddrFromSlice(got[0].Src)
	return src.Unmap(), ok && src.IsValid()
}

// readNICState records a NIC's state as restoreNIC puts it back.
func readNICState(h *netlink.Handle, l netlink.Link) (nicState, error) {
	a := l.Attrs()
	s := nicState{Up: a.Flags&net.FlagUp != 0, MTU: a.MTU, Promisc: a.Promisc != 0}
	if a.Xdp != nil && a.Xdp.Attached {
		s.XDP = a.Xdp.ProgId
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return s, fmt.Errorf("addresses of %s: %w", a.Name, err)
	}
	for _, ad := range addrs {
		ip, ok := netip.AddrFromSlice(ad.IP)
		if !ok || ip.IsLinkLocalUnicast() {
			continue // the kernel makes those itself
		}
		ones, _ := ad.Mask.Size()
		s.Addrs = append(s.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: a.Index, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return s, fmt.Errorf("routes of %s: %w", a.Name, err)
	}
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || r.Dst == nil {
			continue // an address's own route; a default route is refused
		}
		dst, ok := netipPrefix(r.Dst)
		if !ok || dst.Addr().IsLinkLocalUnicast() || dst.Addr().IsMulticast() {
			continue
		}
		nr := nicRoute{Dst: dst, Priority: r.Priority}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			nr.Gw = gw.Unmap()
		}
		if src, ok := netip.AddrFromSlice(r.Src); ok {
			nr.Src = src.Unmap()
		}
		s.Routes = append(s.Routes, nr)
	}
	return s, nil
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// linkOps changes a NIC through netlink.
type linkOps struct {
	h *netlink.Handle
	l netlink.Link
}

func (o linkOps) SetUp(up bool) error {
	if !up {
		return o.wrap("set down", o.h.LinkSetDown(o.l))
	}
	return o.wrap("set up", o.h.LinkSetUp(o.l))
}

func (o linkOps) SetMTU(mtu int) error {
	return o.wrap(fmt.Sprintf("MTU %d", mtu), o.h.LinkSetMTU(o.l, mtu))
}

func (o linkOps) SetPromisc(on bool) error {
	if on {
		return o.wrap("promiscuous on", o.h.SetPromiscOn(o.l))
	}
	return o.wrap("promiscuous off", o.h.SetPromiscOff(o.l))
}

func (o linkOps) AddAddr(p netip.Prefix) error {
	err := o.h.AddrAdd(o.l, &netlink.Addr{IPNet: prefixNet(p)})
	if errors.Is(err, unix.EEXIST) {
		err = nil
	}
	return o.wrap("address "+p.String(), err)
}

func (o linkOps) DelAddr(p netip.Prefix) error {
	return o.wrap("remove address "+p.String(), o.h.AddrDel(o.l, &netlink.Addr{IPNet: prefixNet(p)}))
}

func (o linkOps) AddRoute(r nicRoute) error {
	route := &netlink.Route{LinkIndex: o.l.Attrs().Index, Dst: prefixNet(r.Dst), Priority: r.Priority}
	if r.Gw.IsValid() {
		route.Gw = net.IP(r.Gw.AsSlice())
	}
	if r.Src.IsValid() {
		route.Src = net.IP(r.Src.AsSlice())
	}
	err := o.h.RouteAdd(route)
	if errors.Is(err, unix.EEXIST) {
		err = nil
	}
	return o.wrap("route "+r.Dst.String(), err)
}

func (o linkOps) DetachXDP() error {
	// The handle has no such call; the package's works in this process's
	// namespace, where a NIC is restored.
	return o.wrap("detach XDP", netlink.LinkSetXdpFd(o.l, -1))
}

func (o linkOps) wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("restore NIC %s: %s: %w", o.l.Attrs().Name, what, err)
	}
	return nil
}

// prefixNet is ipNet for either family.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// borrowNIC records the NIC's state in the ledger, then moves it into the
// host side, where it is down and bare.
func borrowNIC(led *ledger.Ledger, nic string, hostSide *namespace) (ledger.Entry, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("uplink %s: %w", nic, err)
	}
	defer h.Close()
	l, err := h.LinkByName(nic)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("uplink %s: %w", nic, err)
	}
	state, err := readNICState(h, l)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("uplink %s: %w", nic, err)
	}
	data, err := json.Marshal(state)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("uplink %s: %w", nic, err)
	}
	e, err := led.Record(kindUplinkNIC, nic, map[string]string{"state": string(data), "netns": hostSide.name})
	if err != nil {
		return ledger.Entry{}, err
	}
	if err := h.LinkSetNsFd(l, int(hostSide.handle)); err != nil {
		return e, fmt.Errorf("uplink %s: move into %s: %w", nic, hostSide.name, err)
	}
	return e, nil
}

// undoUplinkNIC brings the NIC back from the host side, if it is still
// there, and puts its recorded state back.
func undoUplinkNIC(_ context.Context, e ledger.Entry) error {
	var want nicState
	if err := json.Unmarshal([]byte(e.Data["state"]), &want); err != nil {
		return fmt.Errorf("uplink %s: bad state in ledger: %w", e.ID, err)
	}
	if err := returnNIC(e.ID, e.Data["netns"]); err != nil {
		return err
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("uplink %s: %w", e.ID, err)
	}
	defer h.Close()
	l, err := h.LinkByName(e.ID)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		// Gone with its namespace (a veth does): nothing is left to put back.
		return nil
	}
	if err != nil {
		return fmt.Errorf("uplink %s: %w", e.ID, err)
	}
	have, err := readNICState(h, l)
	if err != nil {
		return fmt.Errorf("uplink %s: %w", e.ID, err)
	}
	return restoreNIC(linkOps{h: h, l: l}, want, have)
}

// returnNIC moves the NIC from the named namespace back into this
// process's, when both it and the namespace are still there.
func returnNIC(nic, nsName string) error {
	if nsName == "" {
		return nil
	}
	ns, err := netns.GetFromPath(NSPath(nsName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("uplink %s: namespace %s: %w", nic, nsName, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("uplink %s: netlink into %s: %w", nic, nsName, err)
	}
	defer h.Close()
	l, err := h.LinkByName(nic)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("uplink %s: %w", nic, err)
	}
	if err := h.LinkSetNsPid(l, os.Getpid()); err != nil {
		return fmt.Errorf("uplink %s: move back from %s: %w", nic, nsName, err)
	}
	return nil
}

// CheckUplinkPaths says whether a run on paths can have a dedicated NIC:
// at least one guest path, each of which takes it. A Network puts the NIC
// under one of them (Create): a NIC under several at once would need a
// child device per path (a macvlan, a VLAN), which changes what a bridge
// or a macvlan path measures, so a run on several takes them in turn.
func CheckUplinkPaths(paths []Path) error {
	guest, err := uplinkGuestPaths(paths)
	if err != nil {
		return err
	}
	if len(guest) == 0 {
		return fmt.Errorf("%w: no guest is on a data path, and the bare baseline keeps its direct link", ErrUplinkPath)
	}
	return nil
}

// uplinkGuestPaths are the distinct guest paths of paths, refusing one
// that cannot sit on a NIC.
func uplinkGuestPaths(paths []Path) ([]Path, error) {
	var guest []Path
	for _, p := range paths {
		d, err := lookup(p)
		if err != nil {
			return nil, err
		}
		s := d.Spec()
		if s.Baseline || slices.Contains(guest, p) {
			continue
		}
		if s.NoUplink != "" {
			return nil, fmt.Errorf("%w: %s: %s (paths that take one: %s)", ErrUplinkPath, p, s.NoUplink, strings.Join(names(UplinkPaths()), ", "))
		}
		guest = append(guest, p)
	}
	return guest, nil
}

// UplinkPaths lists the guest paths that can sit on a dedicated NIC.
func UplinkPaths() []Path {
	var out []Path
	for _, p := range GuestPaths() {
		if specOf(p).NoUplink == "" {
			out = append(out, p)
		}
	}
	return out
}

// nicUplink puts path s on the dedicated NIC, already in the host side:
// a port of master when there is one, else addressed itself. The peer
// across the wire is addressed and routed by whoever runs it.
func nicUplink(sides Sides, s Spec, master netlink.Link) error {
	h := sides.Host.nl
	l, err := h.LinkByName(sides.NIC)
	if err != nil {
		return fmt.Errorf("uplink %s: %w", sides.NIC, err)
	}
	hostIf := sides.NIC
	if master != nil {
		if err := h.LinkSetMaster(l, master); err != nil {
			return fmt.Errorf("uplink %s: port of %s: %w", sides.NIC, master.Attrs().Name, err)
		}
		hostIf = master.Attrs().Name
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("uplink %s: set up: %w", sides.NIC, err)
	}
	return addAddr(h, hostIf, s.uplink().Host)
}

// ErrNICName is wrapped by the error for a string that cannot name a
// network interface.
var ErrNICName = errors.New("not a network interface name")

// CheckNICName says whether name can be an interface's, as the kernel
// allows: 1 to 15 bytes, neither "." nor "..", no '/', ':' or space.
func CheckNICName(name string) error {
	if name == "" || len(name) >= unix.IFNAMSIZ || name == "." || name == ".." ||
		strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%w: %q (want the name of a NIC of this host, 1 to %d bytes without '/', ':' or spaces)", ErrNICName, name, unix.IFNAMSIZ-1)
	}
	return nil
}
