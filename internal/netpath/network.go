package netpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath/fastpath"
	"github.com/vfleet/vfleet/internal/procfs"
)

var errClosed = errors.New("network already closed")

// Options configure Create.
type Options struct {
	// RunKey names the run's namespaces ("vfleet-KEY-hs", …).
	RunKey string
	Ledger *ledger.Ledger
	// Paths are the data paths the run's guests use; the baseline's direct
	// link is always built.
	Paths []Path
	// StateDir is the run's own directory, where paths that run daemons
	// (ovs) keep their files; empty means the system's temporary directory.
	StateDir string
	// Detached says the network outlives this process (a fleet's), and so
	// must the daemons its paths start.
	Detached bool
	// Uplink is a NIC of the host dedicated to testing, which replaces
	// the uplink veth of the network's one guest path (a run on several
	// builds one network per path, in turn: CheckUplinkPaths); ""
	// keeps the veth. The peer is then across the NIC, another machine's:
	// no local peer namespace is made, nor the baseline's direct link.
	Uplink string
	// Passthrough are the PCI addresses of the devices given to the VMs
	// on the passthrough path, one each in the order they attach
	// (CheckPassthrough checks them before the run).
	Passthrough []string
}

// Network is the live topology of one run. It is safe for concurrent use.
type Network struct {
	key  string
	led  *ledger.Ledger
	host *namespace // the host side
	peer *namespace
	// sides is what the paths were built between (host side, peer, the
	// run's ledger and state directory).
	sides Sides

	mu     sync.Mutex
	guests map[string]*namespace
	links  map[string]Link
	counts map[Path]int
	paths  []Path        // built, in the order asked, direct first
	live   map[Path]Live // the built paths
	all    []*namespace  // every namespace, oldest first
	// nic is the ledger entry of the borrowed NIC, if any, which goes
	// back before the host side is deleted: a veth playing the NIC would
	// go with it.
	nic *ledger.Entry
	// rootTaps are VMs' taps in this host's own namespace, by guest,
	// until WireRootTap moves each into the host side.
	rootTaps map[string]rootTap
	closed   bool
}

// Create builds the host side, the peer and the uplink of every path. On
// error it removes what it made.
func Create(ctx context.Context, o Options) (n *Network, err error) {
	n = &Network{key: o.RunKey, led: o.Ledger, guests: map[string]*namespace{}, links: map[string]Link{},
		counts: map[Path]int{}, live: map[Path]Live{}, rootTaps: map[string]rootTap{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
			n = nil
		}
	}()
	if o.Uplink != "" {
		if err := CheckUplinkPaths(o.Paths); err != nil {
			return n, err
		}
		// Checked: the paths all take the NIC, and one at least does.
		if guest, _ := uplinkGuestPaths(o.Paths); len(guest) > 1 {
			return n, fmt.Errorf("%w: one network puts it under one path, and this one has %s", ErrUplinkPath, strings.Join(names(guest), ", "))
		}
		if err := CheckUplink(o.Uplink, netip.Addr{}); err != nil {
			return n, err
		}
	}
	if n.host, err = n.namespace("hs"); err != nil {
		return n, err
	}
	// A dedicated NIC leads to a peer on another machine, and the bare
	// baseline's floor is the NIC itself: no local peer, no direct link.
	local := o.Uplink == ""
	if local {
		if n.peer, err = n.namespace("peer"); err != nil {
			return n, err
		}
	}
	// Routed guests need it, and the fast paths hand the stack whatever
	// they cannot forward themselves.
	if err := n.host.sysctl("net/ipv4/ip_forward", "1"); err != nil {
		return n, err
	}
	n.sides = Sides{Host: n.host, Peer: n.peer, Ledger: n.led, StateDir: cmp.Or(o.StateDir, os.TempDir()), Detached: o.Detached,
		Passthrough: o.Passthrough}
	if o.Uplink != "" {
		e, err := borrowNIC(n.led, o.Uplink, n.host)
		if e.Kind != "" {
			n.nic = &e
		}
		if err != nil {
			return n, err
		}
		n.sides.NIC = o.Uplink
	}
	paths := o.Paths
	if local {
		paths = append([]Path{Direct}, paths...)
	}
	seen := map[Path]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		if err := ctx.Err(); err != nil {
			return n, err
		}
		d, err := lookup(p)
		if err != nil {
			return n, err
		}
		live, err := d.Build(n.sides)
		if live != nil {
			// Even half-built: Close releases what it holds.
			n.live[p] = live
		}
		if err != nil {
			return n, fmt.Errorf("network path %s: %w", p, err)
		}
		n.paths = append(n.paths, p)
	}
	return n, nil
}

func (n *Network) namespace(role string) (*namespace, error) {
	name := "vfleet-" + n.key + "-" + role
	ns, err := createNamed(n.led, name)
	if err != nil {
		return nil, err
	}
	n.all = append(n.all, ns)
	if err := setUp(ns.nl, "lo"); err != nil {
		return ns, err
	}
	return ns, nil
}

func setUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

func addAddr(h *netlink.Handle, ifName string, p netip.Prefix) error {
	l, err := h.LinkByName(ifName)
	if err != nil {
		return fmt.Errorf("find %s: %w", ifName, err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, ifName, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

// vethPair creates a veth whose ends are born in their namespaces, so no
// name ever appears in another namespace where it could collide.
func vethPair(from *namespace, name string, mac net.HardwareAddr, to *namespace, peerName string, peerMAC net.HardwareAddr, master netlink.Link) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.HardwareAddr = name, mac
	if master != nil {
		attrs.MasterIndex = master.Attrs().Index
	}
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: peerName, PeerHardwareAddr: peerMAC, PeerNamespace: netlink.NsFd(int(to.handle))}
	if err := from.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s/%s <-> %s/%s: %w", from.name, name, to.name, peerName, err)
	}
	if err := setUp(from.nl, name); err != nil {
		return err
	}
	return setUp(to.nl, peerName)
}

// uplinkIndex marks an uplink end in its MAC: guests use indexes below
// MaxGuestsPerPath.
const uplinkIndex = 0xffff

// buildUplink makes a path's veth between the host side and the peer,
// addressed by its spec, with the routes the peer needs to the path's
// guests. A master (a bridge) takes the host end as its port and carries
// the host side's address itself.
func buildUplink(sides Sides, s Spec, master netlink.Link) error {
	if sides.takesNIC(s) {
		return nicUplink(sides, s, master)
	}
	if err := uplinkVeth(sides, s, master); err != nil {
		return err
	}
	hostIf := s.uplink().HostIf
	if master != nil {
		hostIf = master.Attrs().Name // a bridge port carries no address; the bridge does
	}
	return addressUplink(sides, s, hostIf)
}

// uplinkVeth makes the uplink's veth pair, its host end a port of master
// when there is one.
func uplinkVeth(sides Sides, s Spec, master netlink.Link) error {
	u := s.uplink()
	return vethPair(sides.Host, u.HostIf, s.mac(uplinkIndex, 2), sides.Peer, u.PeerIf, s.mac(uplinkIndex, 1), master)
}

// addressUplink addresses the uplink's ends, the host side's on hostIf
// (the host end itself, or the switch whose port it is), and routes the
// peer to the path's guests.
func addressUplink(sides Sides, s Spec, hostIf string) error {
	u := s.uplink()
	if err := addAddr(sides.Host.nl, hostIf, u.Host); err != nil {
		return err
	}
	if err := addAddr(sides.Peer.nl, u.PeerIf, u.Peer); err != nil {
		return err
	}
	for _, r := range u.Routes {
		gw := u.Host.Addr()
		if err := sides.Peer.nl.RouteAdd(&netlink.Route{Dst: ipNet(r), Gw: net.IP(gw.AsSlice())}); err != nil {
			return fmt.Errorf("peer route %s via %s: %w", r, gw, err)
		}
	}
	return nil
}

// HostSide is the path of the host side's namespace, where the baseline
// runs; its own link to the peer is the direct path.
func (n *Network) HostSide() string { return NSPath(n.host.name) }

// PeerNS is the path of the local peer's namespace, "" when the peer is
// across a dedicated NIC.
func (n *Network) PeerNS() string {
	if n.peer == nil {
		return ""
	}
	return NSPath(n.peer.name)
}

// Attach gives a guest its own namespace with eth0 on path p and returns
// the link's addressing and the namespace's path for the guest to join.
func (n *Network) Attach(guestName string, p Path) (Link, string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Link{}, "", errClosed
	}
	if err := CheckNamespacePath(p); err != nil {
		return Link{}, "", fmt.Errorf("guest %s: %w", guestName, err)
	}
	live, ok := n.live[p]
	if !ok || !n.hasPath(p) {
		return Link{}, "", fmt.Errorf("guest %s: path %s was not set up for this run", guestName, p)
	}
	if _, dup := n.guests[guestName]; dup {
		return Link{}, "", fmt.Errorf("guest %s is already attached", guestName)
	}
	link, err := LinkOf(p, n.counts[p])
	if err != nil {
		return Link{}, "", fmt.Errorf("guest %s: %w", guestName, err)
	}
	n.counts[p]++
	gns, err := n.namespace(guestName)
	if err != nil {
		return Link{}, "", err
	}
	n.guests[guestName] = gns
	if err := wire(live, gns, link); err != nil {
		return Link{}, "", fmt.Errorf("guest %s on path %s: %w", guestName, p, err)
	}
	n.links[guestName] = link
	return link, NSPath(gns.name), nil
}

func (n *Network) hasPath(p Path) bool {
	for _, q := range n.paths {
		if q == p {
			return true
		}
	}
	return false
}

// wire puts the guest's interface on its path, then addresses it.
func wire(live Live, gns *namespace, link Link) error {
	if err := live.AttachNamespace(gns, link); err != nil {
		return err
	}
	if err := addAddr(gns.nl, GuestIfName, link.Addr); err != nil {
		return err
	}
	if link.Gateway.IsValid() {
		if err := gns.nl.RouteAdd(&netlink.Route{Gw: net.IP(link.Gateway.AsSlice())}); err != nil {
			return fmt.Errorf("default route via %s: %w", link.Gateway, err)
		}
	}
	return nil
}

// snmpPath is the namespace's IP counters as the reading thread sees them:
// /proc/net follows the process's main thread, not the thread moved into
// the namespace.
const snmpPath = "/proc/thread-self/net/snmp"

// ForwardedPackets is the host side's IP forwarding counter (ForwDatagrams
// of /proc/net/snmp): packets the kernel's forwarding stack handled, which
// a working fast path keeps still.
func (n *Network) ForwardedPackets() (uint64, error) {
	b, err := n.host.readFile(snmpPath)
	if err != nil {
		return 0, err
	}
	return procfs.ParseForwarded(b)
}

// FastPathCounters returns the counters of a path's eBPF programs, false
// when the path has none.
func (n *Network) FastPathCounters(p Path) (fastpath.Counters, bool, error) {
	n.mu.Lock()
	counting, ok := n.live[p].(Counting)
	n.mu.Unlock()
	if !ok {
		return fastpath.Counters{}, false, nil
	}
	c, err := counting.Counters()
	return c, true, err
}

// DataPathCounters returns the counters of every eBPF data path the run
// has, by path name; paths whose counters cannot be read (the network is
// closing) are left out.
func (n *Network) DataPathCounters() map[string]fastpath.Counters {
	n.mu.Lock()
	counting := map[Path]Counting{}
	for p, l := range n.live {
		if c, ok := l.(Counting); ok {
			counting[p] = c
		}
	}
	n.mu.Unlock()
	out := make(map[string]fastpath.Counters, len(counting))
	for p, c := range counting {
		if c, err := c.Counters(); err == nil {
			out[string(p)] = c
		}
	}
	return out
}

// Describe is the network as stored with the run: paths, devices,
// addresses and the eBPF programs with their counters.
func (n *Network) Describe() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := map[string]string{"host_side": n.host.name, "peer": "across NIC " + n.sides.NIC}
	if n.peer != nil {
		d["peer"] = n.peer.name
	}
	var paths []string
	for _, p := range n.paths {
		paths = append(paths, string(p))
		if specOf(p).Layout == LayoutPeerLinks {
			d["path."+string(p)+".uplink"] = "none: each guest's link ends in the peer"
		} else if s := specOf(p); n.sides.takesNIC(s) {
			u := s.uplink()
			d["path."+string(p)+".uplink"] = fmt.Sprintf("NIC %s %s <-> the wire, peer %s", n.sides.NIC, u.Host, u.Peer)
		} else {
			u := UplinkOf(p)
			d["path."+string(p)+".uplink"] = fmt.Sprintf("%s %s <-> peer %s %s", u.HostIf, u.Host, u.PeerIf, u.Peer)
		}
		for k, v := range n.live[p].Describe() {
			d["path."+string(p)+"."+k] = v
		}
	}
	d["paths"] = strings.Join(paths, ",")
	if f, err := n.forwardedLocked(); err == nil {
		d["host_side.forwarded_packets"] = strconv.FormatUint(f, 10)
	}
	return d
}

func (n *Network) forwardedLocked() (uint64, error) {
	if n.closed {
		return 0, errClosed
	}
	b, err := n.host.readFile(snmpPath)
	if err != nil {
		return 0, err
	}
	return procfs.ParseForwarded(b)
}

func formatCounters(c fastpath.Counters) string {
	parts := []string{fmt.Sprintf("redirected=%d passed=%d dropped=%d", c.Redirected, c.Passed, c.Dropped)}
	reasons := make([]string, 0, len(c.PassedByReason))
	for r := range c.PassedByReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("passed.%s=%d", r, c.PassedByReason[r]))
	}
	return strings.Join(parts, " ")
}

// LinkDetails describes one guest's link for its stored record.
func LinkDetails(l Link) map[string]string {
	d := map[string]string{"net.path": string(l.Path), "net.addr": l.Addr.String(), "net.mac": l.MAC.String(), "net.peer": l.Peer.String()}
	if l.HostIf != "" {
		d["net.host_if"] = l.HostIf
	}
	return d
}

// Close unloads the fast paths and deletes every namespace, newest first;
// the links, bridges and programs inside go with them. Safe to call twice.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	if err := n.closeRootTaps(); err != nil {
		errs = append(errs, err)
	}
	for _, l := range n.live {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(n.all) - 1; i >= 0; i-- {
		if n.nic != nil && n.all[i] == n.host {
			if err := n.led.Release(context.Background(), *n.nic); err != nil {
				errs = append(errs, err)
			}
		}
		ns := n.all[i]
		ns.close()
		if err := deleteNamed(ns.name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := n.led.Done(ns.entry); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
