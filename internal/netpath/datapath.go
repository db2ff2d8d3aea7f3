package netpath

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath/fastpath"
)

// A DataPath is one way from a guest to the peer: its addressing plan (a
// Spec, plain data) and how it is built into a run's network. Each path
// is one file registering itself in init(); the rest of netpath, the
// scenario and the runner ask the registry, never a path's name.
type DataPath interface {
	Spec() Spec
	// Build makes the path's part of a run's network, once, in the host
	// side and the peer (its uplink, a bridge, eBPF programs), and returns
	// the live path that puts guests on it until the network closes.
	Build(sides Sides) (Live, error)
}

// Spec is what a path is, as data.
type Spec struct {
	Name Path
	// Index numbers the path's subnet, uplink and MACs; it is part of
	// every address the path hands out, so it never changes once shipped.
	Index int
	// Layout says how guests on the path are addressed and reached.
	Layout Layout
	// IfPrefix starts the names of the guests' interfaces at the far end
	// of their links ("r0", "r1", …); unique among paths with such ends.
	IfPrefix string
	// NoVMs, when set, is why a VM's NIC cannot be put on the path; it is
	// wrapped in ErrPathNotForVMs.
	NoVMs string
	// NoNamespaces, when set, is why a namespace guest (a container, the
	// host kind) cannot be put on the path; it is wrapped in
	// ErrPathNotForNamespaces.
	NoNamespaces string
	// NoInbound, when set, is why the peer cannot open connections to the
	// path's guests (a workload whose client runs in the peer); it is
	// wrapped in ErrNoInbound.
	NoInbound string
	// VMDevice is what a VM's NIC sits on in the host side.
	VMDevice VMDevice
	// VMOffloadsOff, when set, is why the path needs a VM's NIC to send
	// complete, unsegmented frames: the NIC's checksum and segmentation
	// offloads are turned off (Link.OffloadsOff).
	VMOffloadsOff string
	// Baseline marks the host side's own link: no guest goes on it.
	Baseline bool
	// NoUplink, when set, is why the path cannot sit on a dedicated NIC
	// (Options.Uplink); it is wrapped in ErrUplinkPath.
	NoUplink string
}

// VMDevice is the host side's device behind a VM's NIC.
type VMDevice int

const (
	// VMTap: a persistent tap, which the path puts on itself (an address,
	// a switch port, programs).
	VMTap VMDevice = iota
	// VMMacvtap: a macvtap in bridge mode on the path's uplink host end,
	// with the guest's MAC, on the path from birth.
	VMMacvtap
	// VMPasst: no device, but the unix socket of a passt of the VM's own,
	// a user-mode network stack in the host side that carries the VM's
	// connections through that namespace's sockets. The VM's emulator
	// takes frames from it as a stream netdev.
	VMPasst
	// VMVFIO: no device in the host side, but a PCI device of the host
	// bound to vfio-pci, which the VM's emulator gives the VM whole; the
	// link's HostIf is its PCI address.
	VMVFIO
)

func (d VMDevice) String() string {
	switch d {
	case VMMacvtap:
		return "macvtap"
	case VMPasst:
		return "passt"
	case VMVFIO:
		return "vfio"
	}
	return "tap"
}

// Layout is a path's addressing plan.
type Layout int

const (
	// LayoutRouted: each guest has a /30 to an interface in the host side,
	// which routes between the guests' block and its uplink to the peer.
	LayoutRouted Layout = iota
	// LayoutSwitched: guests, the host side and the peer share the path's
	// /19 on one layer-2 segment behind the uplink.
	LayoutSwitched
	// LayoutPeerLinks: each guest's /30 ends in the peer itself; no uplink.
	LayoutPeerLinks
	// LayoutNAT: each guest has a /30 whose other end is a user-mode stack
	// of its own, which carries its connections through the host side's
	// sockets over the uplink: the peer sees the host side's address,
	// never the guest's, and has no route to the guests.
	LayoutNAT
)

// Sides are the two namespaces every path is built between, and what a
// path that runs daemons of its own (ovs) needs of the run besides.
type Sides struct {
	Host, Peer *namespace
	// Ledger records what a path makes outside the namespaces (processes,
	// files), which deleting them would not take along.
	Ledger *ledger.Ledger
	// StateDir is where such a path keeps its files, in a directory named
	// after the host side, so that runs sharing StateDir never collide.
	StateDir string
	// Detached says the network outlives this process (Options.Detached).
	Detached bool
	// NIC is the dedicated NIC in the host side that replaces the guest
	// path's uplink veth (Options.Uplink), "" for none.
	NIC string
	// Passthrough are the PCI addresses of the devices the passthrough
	// path's VMs get, one each in order (Options.Passthrough).
	Passthrough []string
}

// takesNIC says whether the path s is built on the dedicated NIC.
func (sd Sides) takesNIC(s Spec) bool { return sd.NIC != "" && !s.Baseline }

// uplinkIf is the host side's end of path s's uplink: the NIC or the veth.
func (sd Sides) uplinkIf(s Spec) string {
	if sd.takesNIC(s) {
		return sd.NIC
	}
	return s.uplink().HostIf
}

// Live is a path built into one run's network.
type Live interface {
	// AttachNamespace puts a namespace guest's interface (GuestIfName in
	// gns) on the path; the network then gives it link.Addr and its route.
	AttachNamespace(gns *namespace, link Link) error
	// AttachTap puts a VM's device (Spec.VMDevice), made in the host side
	// and named link.HostIf, on the path. dev is nil for passt's socket,
	// which the path makes itself at link.HostIf, and for a lent PCI
	// device (VMVFIO), which the path binds to vfio-pci itself.
	AttachTap(dev netlink.Link, link Link) error
	// Describe returns what the run's record keeps about the path, by key
	// below "path.NAME.".
	Describe() map[string]string
	// Close releases what the namespaces' deletion does not take along.
	Close() error
}

// Counting is a Live path with counters of its own (the eBPF fast paths).
type Counting interface {
	Counters() (fastpath.Counters, error)
}

// ErrPathNotForVMs says a VM guest was put on a path that cannot carry a
// VM's NIC; the wrapping error names the path and why.
var ErrPathNotForVMs = errors.New("path not available to VM guests")

// ErrPathNotForNamespaces says a namespace guest was put on a path that
// only VMs take; the wrapping error names the path and why.
var ErrPathNotForNamespaces = errors.New("path not available to namespace guests")

// ErrNoInbound says the peer cannot open connections to a path's guests;
// the wrapping error names the path and why.
var ErrNoInbound = errors.New("the peer cannot connect to guests on this path")

// ErrUnknownPath is wrapped by the error for a path name nobody registered.
var ErrUnknownPath = errors.New("unknown network path")

var (
	regMu    sync.RWMutex
	registry = map[Path]DataPath{}
)

// Register adds a data path; it panics on a duplicate name, index or
// interface prefix, which would mix two paths' addresses or devices, and
// on an index the addressing plan has no subnet for.
func Register(d DataPath) {
	regMu.Lock()
	defer regMu.Unlock()
	s := d.Spec()
	if s.Index < 0 || s.Index > maxPathIndex {
		panic(fmt.Sprintf("netpath: path %s has index %d; the addressing plan holds 0 to %d", s.Name, s.Index, maxPathIndex))
	}
	for _, o := range registry {
		os := o.Spec()
		if os.Name == s.Name || os.Index == s.Index || (s.IfPrefix != "" && os.IfPrefix == s.IfPrefix) {
			panic(fmt.Sprintf("netpath: path %s clashes with %s (name, index or interface prefix)", s.Name, os.Name))
		}
	}
	registry[s.Name] = d
}

// lookup returns a registered path, baseline included.
func lookup(p Path) (DataPath, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	d, ok := registry[p]
	if !ok {
		return nil, fmt.Errorf("%w %q (allowed: %s)", ErrUnknownPath, p, strings.Join(names(guestPathsLocked()), ", "))
	}
	return d, nil
}

// specOf is the spec of a registered path; the zero Spec (index 0, which
// is the baseline's) never matches a guest's path, so callers check
// registration first through lookup or ParsePath.
func specOf(p Path) Spec {
	d, err := lookup(p)
	if err != nil {
		return Spec{Name: p, Index: -1}
	}
	return d.Spec()
}

// GuestPaths lists the paths a scenario may put guests on, by name.
func GuestPaths() []Path {
	regMu.RLock()
	defer regMu.RUnlock()
	return guestPathsLocked()
}

func guestPathsLocked() []Path {
	var specs []Spec
	for _, d := range registry {
		if s := d.Spec(); !s.Baseline {
			specs = append(specs, s)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	out := make([]Path, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

func names(ps []Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// VMDeviceOf is what a VM's NIC sits on when path p is registered.
func VMDeviceOf(p Path) VMDevice { return specOf(p).VMDevice }

// VMOffloadsOffOf is why path p turns a VM's NIC's offloads off, empty
// when it leaves them on: what a VM's record must say.
func VMOffloadsOffOf(p Path) string { return specOf(p).VMOffloadsOff }

// ParsePath checks a scenario's path name.
func ParsePath(s string) (Path, error) {
	d, err := lookup(Path(s))
	if err != nil {
		return "", err
	}
	if d.Spec().Baseline {
		return "", fmt.Errorf("%w %q: it is the bare host's own link (allowed: %s)", ErrUnknownPath, s, strings.Join(names(GuestPaths()), ", "))
	}
	return Path(s), nil
}

// CheckVMPath says whether a VM guest can be put on path p, so a scenario
// is refused before anything is built.
func CheckVMPath(p Path) error {
	return checkPathTakes(p, func(s Spec) string { return s.NoVMs }, ErrPathNotForVMs, "VMs")
}

// CheckRootTapPath says whether a VM whose emulator opens its tap by name
// in this host's own namespace (AttachRootTap) can be put on path p: a
// path that takes VMs on a tap.
func CheckRootTapPath(p Path) error {
	return checkPathTakes(p, func(s Spec) string {
		switch {
		case s.NoVMs != "":
			return s.NoVMs
		case s.VMDevice != VMTap:
			return fmt.Sprintf("a VM's device on it is a %s, not the tap an emulator outside the run's namespaces opens by name", s.VMDevice)
		}
		return ""
	}, ErrPathNotForVMs, "VMs whose emulator opens their tap by name (libvirt's)")
}

// CheckNamespacePath says whether a namespace guest (a container, the
// host kind) can be put on path p, so a scenario is refused before
// anything is built.
func CheckNamespacePath(p Path) error {
	return checkPathTakes(p, func(s Spec) string { return s.NoNamespaces }, ErrPathNotForNamespaces, "namespace guests")
}

// CheckInbound says whether the peer can open connections to guests on
// path p, as a workload whose client runs in the peer does.
func CheckInbound(p Path) error {
	d, err := lookup(p)
	if err != nil {
		return err
	}
	if why := d.Spec().NoInbound; why != "" {
		return fmt.Errorf("%w: %s: %s", ErrNoInbound, p, why)
	}
	return nil
}

// checkPathTakes refuses path p with sentinel when refusal gives a reason
// for its spec, naming the paths that take those guests (who).
func checkPathTakes(p Path, refusal func(Spec) string, sentinel error, who string) error {
	d, err := lookup(p)
	if err != nil {
		return err
	}
	if why := refusal(d.Spec()); why != "" {
		var ok []string
		for _, q := range GuestPaths() {
			if refusal(specOf(q)) == "" {
				ok = append(ok, string(q))
			}
		}
		return fmt.Errorf("%w: %s: %s (%s take %s)", sentinel, p, why, who, strings.Join(ok, ", "))
	}
	return nil
}
