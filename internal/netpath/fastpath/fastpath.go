package fastpath

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Mode is which fast path a Set runs.
type Mode string

const (
	// XDP forwards in the veth driver's XDP hook, redirecting frames.
	XDP Mode = "xdp"
	// TC forwards in the clsact ingress hook, redirecting skbs to the
	// egress veth's peer.
	TC Mode = "tc"
)

// Modes lists the fast paths, for messages and validation.
func Modes() []Mode { return []Mode{XDP, TC} }

// ErrNotSupported says the kernel refused a fast path: a program did not
// load, or a hook would not take it. The wrapping error says what and why.
var ErrNotSupported = errors.New("not supported on this host")

// ErrClosed is returned by calls on a Set after Close.
var ErrClosed = errors.New("fast path already closed")

// progDesc is what Describe says of a loaded program.
type progDesc struct {
	name string
	id   ebpf.ProgramID
	tag  string
}

// Set is one mode's loaded programs and maps and every interface they are
// attached to.
type Set struct {
	mode    Mode
	objects io.Closer
	fwd     *ebpf.Program
	pass    *ebpf.Program // xdp only: for the far ends
	// egress holds the host ends the fast path may send to, keyed by
	// ifindex: the XDP device map, or tc's map of veths.
	egress   *ebpf.Map
	counters *ebpf.Map
	progs    []progDesc

	mu     sync.Mutex
	closed bool
	spaces map[nsKey]*space
	// ifaces in attach order; Close undoes them in reverse.
	ifaces []*iface
}

// Load loads mode's programs and maps into the kernel. Nothing is attached
// yet. A kernel that refuses them yields an error wrapping ErrNotSupported.
func Load(mode Mode) (*Set, error) {
	s := &Set{mode: mode, spaces: map[nsKey]*space{}}
	var loadErr error
	switch mode {
	case XDP:
		var o xdpObjects
		loadErr = loadXdpObjects(&o, nil)
		if loadErr == nil {
			s.objects, s.fwd, s.pass, s.egress, s.counters = &o, o.VfleetXdpFwd, o.VfleetXdpPass, o.FpEgress, o.FpCounters
		}
	case TC:
		var o tcObjects
		loadErr = loadTcObjects(&o, nil)
		if loadErr == nil {
			s.objects, s.fwd, s.egress, s.counters = &o, o.VfleetTcFwd, o.FpVeths, o.FpCounters
		}
	default:
		return nil, fmt.Errorf("fast path mode %q is unknown (known: %s, %s)", mode, XDP, TC)
	}
	if loadErr != nil {
		return nil, fmt.Errorf("load the %s fast path: %w: %w", mode, ErrNotSupported, loadErr)
	}
	if n := s.counters.MaxEntries(); int(n) != len(reasonNames) {
		s.objects.Close()
		return nil, fmt.Errorf("load the %s fast path: its counters map has %d entries but %d reasons are named; regenerate the objects", mode, n, len(reasonNames))
	}
	for _, p := range []*ebpf.Program{s.fwd, s.pass} {
		if p == nil {
			continue
		}
		info, err := p.Info()
		if err != nil {
			s.objects.Close()
			return nil, fmt.Errorf("load the %s fast path: read program info: %w", mode, err)
		}
		id, _ := info.ID()
		s.progs = append(s.progs, progDesc{name: info.Name, id: id, tag: info.Tag})
	}
	return s, nil
}

// Mode is the fast path this Set runs.
func (s *Set) Mode() Mode { return s.mode }

// ProgramIDs are the kernel's ids of the loaded programs, so callers and
// tests can tell them apart from others.
func (s *Set) ProgramIDs() []ebpf.ProgramID {
	ids := make([]ebpf.ProgramID, 0, len(s.progs))
	for _, p := range s.progs {
		ids = append(ids, p.id)
	}
	return ids
}

// Attach installs the fast path on the veth hostIf in namespace hostNS,
// whose other end is farIf in farNS. In xdp mode the far end gets the pass
// program and TX checksum offload off. Attaching the same pair again does
// nothing; a failed Attach undoes what it did. Offload settings of both
// ends are recorded for Describe.
//
// The namespace handles stay the caller's; the Set opens its own sockets
// in them.
func (s *Set) Attach(hostNS netns.NsHandle, hostIf string, farNS netns.NsHandle, farIf string) error {
	if hostIf == "" || farIf == "" {
		return fmt.Errorf("attach %s fast path: need both interface names (host %q, far %q)", s.mode, hostIf, farIf)
	}
	return s.attach(hostNS, hostIf, &farEnd{ns: farNS, name: farIf}, false)
}

// AttachTap installs the fast path on the tap tapName in namespace hostNS,
// a VM's NIC. Its far end is the VM's emulator, which the Set cannot
// prepare: in xdp mode the program runs in tun's driver mode, which takes
// only frames the emulator writes whole (no GSO, no partial checksum), so
// the VM's NIC must send without those offloads. The tap goes in the xdp
// device map, for the uplink's program to redirect into; tc sends to it
// with bpf_redirect_neigh, as to any device that is not one of its veths.
// Attaching the same tap again does nothing; a failed AttachTap undoes
// what it did.
func (s *Set) AttachTap(hostNS netns.NsHandle, tapName string) error {
	if tapName == "" {
		return fmt.Errorf("attach %s fast path to a tap: need its name", s.mode)
	}
	return s.attach(hostNS, tapName, nil, false)
}

// AttachNIC installs the fast path on nicName in namespace hostNS, a NIC
// dedicated to the run whose far end is another machine's, which the Set
// cannot prepare. tc hooks its ingress and sends to it with
// bpf_redirect_neigh, as to a tap. xdp attaches in driver mode where the
// NIC's driver takes it, else in generic mode, and puts the NIC in the
// device map only while the kernel reports its driver transmits XDP
// frames; Describe says which. Attaching the same NIC again does
// nothing; a failed AttachNIC undoes what it did.
func (s *Set) AttachNIC(hostNS netns.NsHandle, nicName string) error {
	if nicName == "" {
		return fmt.Errorf("attach %s fast path to a NIC: need its name", s.mode)
	}
	return s.attach(hostNS, nicName, nil, true)
}

// farEnd is where a veth's other end is; nil for a tap or a NIC.
type farEnd struct {
	ns   netns.NsHandle
	name string
}

func (s *Set) attach(hostNS netns.NsHandle, hostIf string, farIf *farEnd, nic bool) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("attach %s fast path to %s: %w", s.mode, hostIf, ErrClosed)
	}
	hostKey, err := keyOf(hostNS)
	if err != nil {
		return fmt.Errorf("attach %s fast path to %s: %w", s.mode, hostIf, err)
	}
	var farKey nsKey
	if farIf != nil {
		if farKey, err = keyOf(farIf.ns); err != nil {
			return fmt.Errorf("attach %s fast path to %s's far end %s: %w", s.mode, hostIf, farIf.name, err)
		}
	}
	if done, err := s.attachedAlready(hostKey, hostIf, farKey, farIf, nic); done || err != nil {
		return err
	}

	var undo undoList
	defer func() {
		if err != nil {
			err = errors.Join(err, undo.run())
			s.dropUnusedSpaces()
		}
	}()
	hostSp, err := s.space(hostNS, hostKey)
	if err != nil {
		return fmt.Errorf("attach %s fast path to %s: %w", s.mode, hostIf, err)
	}
	host := &iface{sp: hostSp, name: hostIf, tap: farIf == nil && !nic, nic: nic}
	hostLink, err := host.lookup()
	if err != nil {
		return fmt.Errorf("attach %s fast path to %s: %w", s.mode, hostIf, err)
	}
	attached := []*iface{host}
	if farIf != nil {
		far, err := s.farIface(host, hostLink, farIf, farKey)
		if err != nil {
			return err
		}
		attached = []*iface{far, host}
	}
	// Read before touching either end: XDP on one end of a veth changes
	// the offloads of the other.
	for _, ifc := range attached {
		ifc.before = ifc.readOffloads()
	}
	// The far end first: frames must not be redirected towards it before
	// it can deliver them and its checksums are complete.
	if far := host.peer; far != nil {
		if err := s.prepareFar(far, &undo); err != nil {
			return fmt.Errorf("attach %s fast path to %s's far end %s: %w", s.mode, hostIf, far.name, err)
		}
	}
	if err := s.attachHost(host, hostLink, &undo); err != nil {
		return fmt.Errorf("attach %s fast path to %s: %w", s.mode, hostIf, err)
	}
	// Attaching XDP to one end changes the other's offloads, so both are
	// read once everything is in place.
	for _, ifc := range attached {
		ifc.after = ifc.readOffloads()
	}
	s.ifaces = append(s.ifaces, attached...)
	return nil
}

// farIface finds the far end of the veth host and checks that the two are
// a pair.
func (s *Set) farIface(host *iface, hostLink netlink.Link, farIf *farEnd, farKey nsKey) (*iface, error) {
	farSp, err := s.space(farIf.ns, farKey)
	if err != nil {
		return nil, fmt.Errorf("attach %s fast path to %s's far end %s: %w", s.mode, host.name, farIf.name, err)
	}
	far := &iface{sp: farSp, name: farIf.name, far: true}
	farLink, err := far.lookup()
	if err != nil {
		return nil, fmt.Errorf("attach %s fast path to %s's far end %s: %w", s.mode, host.name, farIf.name, err)
	}
	// A veth reports its peer's ifindex as its link; both ends must point
	// at each other, or the pass program and checksum settings would go to
	// a device that never receives this pair's frames.
	if hostLink.Attrs().ParentIndex != far.index || farLink.Attrs().ParentIndex != host.index {
		return nil, fmt.Errorf("attach %s fast path to %s: %s (ifindex %d) in the far namespace is not its peer (its peer has ifindex %d)",
			s.mode, host.name, farIf.name, far.index, hostLink.Attrs().ParentIndex)
	}
	host.peer, far.peer = far, host
	return far, nil
}

// attachedAlready says whether this interface is attached as asked (a veth
// with this far end, or a tap when farIf is nil), and refuses one that
// overlaps an attachment made differently.
func (s *Set) attachedAlready(hostKey nsKey, hostIf string, farKey nsKey, farIf *farEnd, nic bool) (bool, error) {
	var host, far *iface
	for _, ifc := range s.ifaces {
		switch {
		case !ifc.far && ifc.sp.key == hostKey && ifc.name == hostIf:
			host = ifc
		case ifc.far && farIf != nil && ifc.sp.key == farKey && ifc.name == farIf.name:
			far = ifc
		}
	}
	switch {
	case host == nil && far == nil:
		return false, nil
	case host != nil && (host.tap != (farIf == nil && !nic) || host.nic != nic):
		return false, fmt.Errorf("attach %s fast path to %s: already attached as a %s", s.mode, hostIf, host.kind())
	case host != nil && host.peer == far:
		return true, nil
	case host != nil:
		return false, fmt.Errorf("attach %s fast path to %s: already attached with far end %s in netns inode %d, not %s in netns inode %d",
			s.mode, hostIf, host.peer.name, host.peer.sp.key.ino, farIf.name, farKey.ino)
	default:
		return false, fmt.Errorf("attach %s fast path to %s: its far end %s is already attached as the far end of %s", s.mode, hostIf, farIf.name, far.peer.name)
	}
}

// space returns the Set's sockets in a namespace, opening them once.
func (s *Set) space(ns netns.NsHandle, key nsKey) (*space, error) {
	if sp, ok := s.spaces[key]; ok {
		return sp, nil
	}
	sp, err := openSpace(ns, key)
	if err != nil {
		return nil, err
	}
	s.spaces[key] = sp
	return sp, nil
}

// dropUnusedSpaces closes the sockets of namespaces no attached interface
// is in, so a failed Attach keeps no namespace alive.
func (s *Set) dropUnusedSpaces() {
	used := map[nsKey]bool{}
	for _, ifc := range s.ifaces {
		used[ifc.sp.key] = true
	}
	for key, sp := range s.spaces {
		if !used[key] {
			sp.close()
			delete(s.spaces, key)
		}
	}
}

// Counters reads the counters, summed over CPUs.
func (s *Set) Counters() (Counters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Counters{}, fmt.Errorf("read %s fast path counters: %w", s.mode, ErrClosed)
	}
	perCPU := make([][]uint64, s.counters.MaxEntries())
	for i := range perCPU {
		if err := s.counters.Lookup(uint32(i), &perCPU[i]); err != nil {
			return Counters{}, fmt.Errorf("read %s fast path counter %d: %w", s.mode, i, err)
		}
	}
	return sumCounters(perCPU)
}

// Describe says what is loaded and attached where, with the offload
// settings of every interface, to be stored with a run. It still answers
// after Close, with what was attached.
func (s *Set) Describe() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return describe(s.mode, s.progs, s.ifaces)
}

// Close detaches the fast path from every interface that still exists,
// turns TX checksum offload back on where Attach turned it off, and
// unloads the programs and maps. It is safe to call twice.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for i := len(s.ifaces) - 1; i >= 0; i-- {
		if err := s.detach(s.ifaces[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for key, sp := range s.spaces {
		sp.close()
		delete(s.spaces, key)
	}
	if err := s.objects.Close(); err != nil {
		errs = append(errs, fmt.Errorf("unload the %s fast path: %w", s.mode, err))
	}
	return errors.Join(errs...)
}

// undoList is the LIFO of what a failing Attach must take back.
type undoList []func() error

func (u *undoList) push(f func() error) { *u = append(*u, f) }

func (u *undoList) run() error {
	var errs []error
	for i := len(*u) - 1; i >= 0; i-- {
		if err := (*u)[i](); err != nil {
			errs = append(errs, err)
		}
	}
	*u = nil
	return errors.Join(errs...)
}
