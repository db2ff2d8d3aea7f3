package fastpath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// How an interface is hooked, as Describe says it.
const (
	hookXDPDriver = "xdp driver mode"
	// hookXDPGeneric is a NIC's whose driver refused driver mode (most
	// often: it has no XDP of its own): the program runs on skbs the
	// stack already built, and the guests' programs hand frames for it to
	// the stack, since its driver is not known to transmit redirected ones.
	hookXDPGeneric = "xdp generic mode (the NIC's driver refused driver mode)"
	hookTCIngress  = "tc clsact ingress, direct action"
	hookNone       = "nothing attached"
)

// The tc filter has a fixed priority and handle, so that Attach replaces
// its own filter instead of stacking a second one, and Close deletes
// exactly it and no one else's.
const (
	tcPriority = 0xfa57
	tcHandle   = 1
)

// iface is one end of an attached veth pair, an attached tap or NIC.
type iface struct {
	sp    *space
	name  string
	index int
	// far is set on the far end, the one in the guest's or peer's
	// namespace; peer is the other end of the pair, nil for a tap.
	far  bool
	peer *iface
	tap  bool
	// nic: a NIC dedicated to the run, of any driver, its far end
	// another machine's; sendsTo says how the guests' programs send to
	// it, for Describe.
	nic     bool
	sendsTo string

	hook string
	prog *ebpf.Program
	// progName stays after Close, for Describe.
	progName string
	// ownQdisc: Attach created the clsact qdisc, so Close removes it.
	ownQdisc bool
	// inMap: the host end is in the egress map.
	inMap bool
	// txCsumOff: Attach turned TX checksum offload off; Close turns it on.
	txCsumOff     bool
	before, after offloads
}

func (ifc *iface) readOffloads() offloads {
	var o offloads
	ifc.sp.ethtool(func(fd int) error {
		o = readOffloads(fd, ifc.name)
		return nil
	})
	return o
}

// kind is what the interface was attached as.
func (ifc *iface) kind() string {
	switch {
	case ifc.tap:
		return "tap"
	case ifc.nic:
		return "NIC"
	}
	return "veth"
}

// lookup finds the link and checks it is what it was attached as: the
// fast paths rely on veth behaviour (native XDP, a peer for
// bpf_redirect_peer) and on tun's (native XDP for the frames a VM's
// emulator writes, ndo_xdp_xmit towards it).
func (ifc *iface) lookup() (netlink.Link, error) {
	link, err := ifc.sp.nl.LinkByName(ifc.name)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", ifc.name, err)
	}
	tap, isTap := link.(*netlink.Tuntap)
	switch {
	case ifc.tap && (!isTap || tap.Mode != netlink.TUNTAP_MODE_TAP):
		return nil, fmt.Errorf("%s is a %s link, not the tap it was attached as", ifc.name, link.Type())
	case !ifc.tap && !ifc.nic && link.Type() != "veth":
		return nil, fmt.Errorf("%s is a %s link; the fast paths attach to veth pairs and taps only", ifc.name, link.Type())
	}
	ifc.index = link.Attrs().Index
	return link, nil
}

// prepareFar readies the far end. For xdp: TX checksums complete, since an
// XDP frame cannot carry a partial one, then the pass program, without
// which the veth would drop frames redirected into it. For tc there is
// nothing to change; its offloads are still recorded.
func (s *Set) prepareFar(far *iface, undo *undoList) error {
	far.hook = hookNone
	if s.mode != XDP {
		return nil
	}
	if far.before["tx-checksumming"] {
		if err := far.sp.ethtool(func(fd int) error { return setTxChecksum(fd, far.name, false) }); err != nil {
			return err
		}
		far.txCsumOff = true
		undo.push(func() error { return far.restoreTxChecksum() })
	}
	return s.attachXDP(far, s.pass, undo)
}

// attachHost hooks the forwarding program to the host end and only then
// lets the other host ends send to it. A tap or a NIC stays out of tc's
// map of veths: it has no peer to redirect into, so tc hands it to the
// kernel's neighbour code instead. A NIC whose driver cannot transmit a
// redirected XDP frame stays out of the xdp device map: the guests'
// programs hand its frames to the stack.
func (s *Set) attachHost(host *iface, link netlink.Link, undo *undoList) error {
	var err error
	switch s.mode {
	case XDP:
		err = s.attachXDP(host, s.fwd, undo)
	case TC:
		err = s.attachTC(host, link, undo)
	}
	if err != nil || (s.mode == TC && (host.tap || host.nic)) {
		if host.nic && err == nil {
			host.sendsTo = "bpf_redirect_neigh from the guests' programs"
		}
		return err
	}
	if host.nic {
		if host.sendsTo = s.nicRedirect(host); host.sendsTo != redirectedToNIC {
			return nil
		}
	}
	key := uint32(host.index)
	if err := host.sp.do(func() error { return s.egress.Put(key, key) }); err != nil {
		return fmt.Errorf("add %s (ifindex %d) to the egress map: %w", host.name, key, err)
	}
	host.inMap = true
	undo.push(func() error { return s.unmap(host) })
	return nil
}

const redirectedToNIC = "redirected by the guests' programs (in the device map; its driver transmits XDP frames)"

// nicRedirect says whether the guests' xdp programs may redirect to the
// NIC: redirectedToNIC, else why its frames go through the stack.
func (s *Set) nicRedirect(nic *iface) string {
	if nic.hook == hookXDPGeneric {
		return "the stack: the guests' programs pass its frames, since its driver refused XDP in driver mode"
	}
	ok, err := nic.sp.xdpTransmits(nic.index)
	switch {
	case err != nil:
		return fmt.Sprintf("the stack: the guests' programs pass its frames, since whether its driver transmits XDP frames is unknown: %v", err)
	case !ok:
		return "the stack: the guests' programs pass its frames, since its driver does not transmit XDP frames now " +
			"(xdp-features without ndo-xmit; a veth's far end needs GRO or an XDP program)"
	}
	return redirectedToNIC
}

// attachXDP attaches prog in driver mode, refusing to replace a program
// someone else attached, and checks the kernel really used driver mode:
// generic mode would work but measure a different, slower path. Only a
// NIC, whose driver is the lab's, falls back to generic mode, which its
// hook records.
func (s *Set) attachXDP(ifc *iface, prog *ebpf.Program, undo *undoList) error {
	hook, flags, attached := hookXDPDriver, uint32(nl.XDP_FLAGS_DRV_MODE), uint32(nl.XDP_ATTACHED_DRV)
	err := ifc.sp.setXDP(ifc.index, prog.FD(), flags|nl.XDP_FLAGS_UPDATE_IF_NOEXIST)
	if ifc.nic && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
		hook, flags, attached = hookXDPGeneric, nl.XDP_FLAGS_SKB_MODE, nl.XDP_ATTACHED_SKB
		err = ifc.sp.setXDP(ifc.index, prog.FD(), flags|nl.XDP_FLAGS_UPDATE_IF_NOEXIST)
	}
	if err != nil {
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("attach xdp to %s: another XDP program is attached already: %w", ifc.name, err)
		}
		return fmt.Errorf("attach xdp to %s in %s: %w: %w", ifc.name, hook, ErrNotSupported, err)
	}
	ifc.prog, ifc.hook, ifc.progName = prog, hook, s.progName(prog)
	undo.push(func() error { return s.detachProg(ifc) })
	id, mode, err := ifc.sp.attachedXDP(ifc.index)
	if err != nil {
		return fmt.Errorf("check xdp on %s: %w", ifc.name, err)
	}
	if want := s.progID(prog); id != want || mode != attached {
		return fmt.Errorf("attach xdp to %s: the kernel reports program %d in attach mode %d, want program %d in %s (%d): %w",
			ifc.name, id, mode, want, hook, attached, ErrNotSupported)
	}
	return nil
}

// attachTC adds a clsact qdisc (keeping one that exists) and the filter.
func (s *Set) attachTC(host *iface, link netlink.Link, undo *undoList) error {
	qdisc := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: host.index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT,
	}}
	switch err := host.sp.nl.QdiscAdd(qdisc); {
	case err == nil:
		host.ownQdisc = true
		undo.push(func() error { return s.detachProg(host) })
	case errors.Is(err, unix.EEXIST):
	default:
		return fmt.Errorf("add clsact qdisc to %s: %w: %w", host.name, ErrNotSupported, err)
	}
	if err := host.sp.nl.FilterReplace(tcFilter(host.index, s.fwd)); err != nil {
		return fmt.Errorf("add tc ingress filter to %s: %w: %w", host.name, ErrNotSupported, err)
	}
	host.prog, host.hook, host.progName = s.fwd, hookTCIngress, s.progName(s.fwd)
	if !host.ownQdisc {
		undo.push(func() error { return s.detachProg(host) })
	}
	// Believe the kernel, not the request: the filter must be there, ours.
	filters, err := host.sp.nl.FilterList(link, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return fmt.Errorf("list tc ingress filters of %s: %w", host.name, err)
	}
	want := s.progID(s.fwd)
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Priority == tcPriority && ebpf.ProgramID(bf.Id) == want && bf.DirectAction {
			return nil
		}
	}
	return fmt.Errorf("add tc ingress filter to %s: the kernel does not list program %d at priority %d", host.name, want, tcPriority)
}

func tcFilter(ifindex int, prog *ebpf.Program) *netlink.BpfFilter {
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    tcHandle,
			Priority:  tcPriority,
			Protocol:  unix.ETH_P_ALL,
		},
		Name:         "vfleet_tc_fwd",
		DirectAction: true,
	}
	if prog != nil {
		f.Fd = prog.FD()
	}
	return f
}

func (s *Set) progID(prog *ebpf.Program) ebpf.ProgramID { return s.progDesc(prog).id }

func (s *Set) progName(prog *ebpf.Program) string { return s.progDesc(prog).name }

// progDesc finds a program's description; s.progs is in the order of
// fwd, pass.
func (s *Set) progDesc(prog *ebpf.Program) progDesc {
	for i, p := range []*ebpf.Program{s.fwd, s.pass} {
		if p == prog && i < len(s.progs) {
			return s.progs[i]
		}
	}
	return progDesc{}
}

// detach undoes one interface's attachment, in the reverse order of
// Attach. A link that is gone took its programs with it and is skipped.
func (s *Set) detach(ifc *iface) error {
	var errs []error
	if ifc.inMap {
		if err := s.unmap(ifc); err != nil {
			errs = append(errs, err)
		}
	}
	if ifc.prog != nil {
		if err := s.detachProg(ifc); err != nil {
			errs = append(errs, err)
		}
	}
	if ifc.txCsumOff {
		if err := ifc.restoreTxChecksum(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Set) unmap(ifc *iface) error {
	if err := s.egress.Delete(uint32(ifc.index)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove %s (ifindex %d) from the egress map: %w", ifc.name, ifc.index, err)
	}
	ifc.inMap = false
	return nil
}

// detachProg removes the program, but only if it is still ours: an
// ifindex whose link was deleted and whose number was reused is left
// alone.
func (s *Set) detachProg(ifc *iface) error {
	link, err := ifc.sp.nl.LinkByIndex(ifc.index)
	if isGone(err) || (err == nil && link.Attrs().Name != ifc.name) {
		ifc.prog, ifc.ownQdisc = nil, false
		return nil
	}
	if err != nil {
		return fmt.Errorf("detach from %s: %w", ifc.name, err)
	}
	switch ifc.hook {
	case hookXDPDriver, hookXDPGeneric:
		flags := uint32(nl.XDP_FLAGS_DRV_MODE)
		if ifc.hook == hookXDPGeneric {
			flags = nl.XDP_FLAGS_SKB_MODE
		}
		if x := link.Attrs().Xdp; x != nil && x.Attached && ebpf.ProgramID(x.ProgId) == s.progID(ifc.prog) {
			if err := ifc.sp.setXDP(ifc.index, -1, flags); err != nil && !isGone(err) {
				return fmt.Errorf("detach xdp from %s: %w", ifc.name, err)
			}
		}
	case hookTCIngress, "":
		// "" is a clsact qdisc added before its filter was.
		if ifc.hook != "" {
			if err := ifc.sp.nl.FilterDel(tcFilter(ifc.index, nil)); err != nil && !isGone(err) {
				return fmt.Errorf("delete tc ingress filter of %s: %w", ifc.name, err)
			}
		}
		if ifc.ownQdisc {
			qdisc := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
				LinkIndex: ifc.index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT,
			}}
			if err := ifc.sp.nl.QdiscDel(qdisc); err != nil && !isGone(err) && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("delete clsact qdisc of %s: %w", ifc.name, err)
			}
		}
	}
	ifc.prog, ifc.ownQdisc = nil, false
	return nil
}

func (ifc *iface) restoreTxChecksum() error {
	link, err := ifc.sp.nl.LinkByIndex(ifc.index)
	if isGone(err) || (err == nil && link.Attrs().Name != ifc.name) {
		ifc.txCsumOff = false
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore tx-checksumming on %s: %w", ifc.name, err)
	}
	if err := ifc.sp.ethtool(func(fd int) error { return setTxChecksum(fd, ifc.name, true) }); err != nil && !isGone(err) {
		return err
	}
	ifc.txCsumOff = false
	return nil
}
