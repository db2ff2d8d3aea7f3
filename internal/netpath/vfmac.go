package netpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
)

// A virtual function's MAC is not its own to keep: ixgbevf, iavf and mlx5
// make up a random one when its physical function set none, and the VM's
// driver makes up another. So the passthrough path sets the VM's MAC on
// the VF administratively, through its physical function, before the VF
// is bound: the VF's driver in the VM is handed that one.

// kindVFMAC is the ledger kind of a VF's administrative MAC set by a run:
// its ID is the VF's PCI address, its data the physical function's
// interface ("pf"), the VF's index there ("vf") and its MAC before ("mac").
const kindVFMAC = "vf-mac"

func init() {
	ledger.RegisterUndo(kindVFMAC, func(_ context.Context, e ledger.Entry) error {
		return undoVFMAC(netlinkVFs{}, e)
	})
}

// errNoPF is wrapped by vfMACs' errors for a physical function the host
// no longer has: its VFs went with it, and nothing is left to put back.
var errNoPF = errors.New("no such physical function")

// vfMACs reads and sets VFs' administrative MACs through their physical
// function's interface (pf), VF by index.
type vfMACs interface {
	VFMAC(pf string, vf int) (net.HardwareAddr, error)
	SetVFMAC(pf string, vf int, mac net.HardwareAddr) error
}

// netlinkVFs is vfMACs on the host's own physical functions.
type netlinkVFs struct{}

func (netlinkVFs) link(pf string) (netlink.Link, error) {
	l, err := netlink.LinkByName(pf)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, fmt.Errorf("%w: %s", errNoPF, pf)
	}
	return l, err
}

func (v netlinkVFs) VFMAC(pf string, vf int) (net.HardwareAddr, error) {
	l, err := v.link(pf)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(l.Attrs().Vfs, func(info netlink.VfInfo) bool { return info.ID == vf })
	if i < 0 {
		return nil, fmt.Errorf("%s reports no virtual function %d", pf, vf)
	}
	return l.Attrs().Vfs[i].Mac, nil
}

func (v netlinkVFs) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	l, err := v.link(pf)
	if err != nil {
		return err
	}
	return netlink.LinkSetVfHardwareAddr(l, vf, mac)
}

// vfSlot is where a VF's MAC is set: its physical function's interface
// and the VF's index there.
type vfSlot struct {
	PF    string
	Index int
}

// readVFSlot finds the VF d in its physical function's virtfnN links and
// the interface of that physical function.
func readVFSlot(root string, d pciDevice) (vfSlot, error) {
	pf, err := readPCIDevice(root, d.PhysFn)
	if err != nil {
		return vfSlot{}, fmt.Errorf("its physical function %s: %w", d.PhysFn, err)
	}
	if len(pf.Ifaces) == 0 {
		return vfSlot{}, fmt.Errorf("its physical function %s has no network interface, through which its MAC is set: bind %s to its network driver", d.PhysFn, d.PhysFn)
	}
	links, err := filepath.Glob(devicePath(root, d.PhysFn, "virtfn*"))
	if err != nil {
		return vfSlot{}, err
	}
	for _, l := range links {
		to, err := linkBase(l)
		if err != nil {
			return vfSlot{}, err
		}
		if to != d.Addr {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		if err != nil {
			return vfSlot{}, fmt.Errorf("its physical function %s: %s: %w", d.PhysFn, filepath.Base(l), err)
		}
		return vfSlot{PF: pf.Ifaces[0].Name, Index: n}, nil
	}
	return vfSlot{}, fmt.Errorf("its physical function %s does not list it as a virtual function", d.PhysFn)
}

// setVFMAC records the VF at addr with its administrative MAC in the
// ledger, then sets mac through its physical function and reads it back.
func setVFMAC(led *ledger.Ledger, v vfMACs, addr string, s vfSlot, mac net.HardwareAddr) (ledger.Entry, error) {
	old, err := v.VFMAC(s.PF, s.Index)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("device %s: MAC of VF %d of %s: %w", addr, s.Index, s.PF, err)
	}
	e, err := led.Record(kindVFMAC, addr, map[string]string{"pf": s.PF, "vf": strconv.Itoa(s.Index), "mac": old.String()})
	if err != nil {
		return ledger.Entry{}, err
	}
	if err := v.SetVFMAC(s.PF, s.Index, mac); err != nil {
		return e, fmt.Errorf("device %s: set its MAC %s (ip link set %s vf %d mac %s): %w", addr, mac, s.PF, s.Index, mac, err)
	}
	got, err := v.VFMAC(s.PF, s.Index)
	if err != nil {
		return e, fmt.Errorf("device %s: MAC of VF %d of %s: %w", addr, s.Index, s.PF, err)
	}
	if !slices.Equal(got, mac) {
		return e, fmt.Errorf("device %s: %s kept MAC %s for VF %d, not %s", addr, s.PF, got, s.Index, mac)
	}
	return e, nil
}

// undoVFMAC puts a VF's administrative MAC back as the entry recorded it.
func undoVFMAC(v vfMACs, e ledger.Entry) error {
	vf, err := strconv.Atoi(e.Data["vf"])
	if err != nil {
		return fmt.Errorf("device %s: bad VF index in ledger: %w", e.ID, err)
	}
	mac := make(net.HardwareAddr, 6) // none recorded: the kernel's "none"
	if e.Data["mac"] != "" {
		if mac, err = net.ParseMAC(e.Data["mac"]); err != nil {
			return fmt.Errorf("device %s: bad MAC in ledger: %w", e.ID, err)
		}
	}
	err = v.SetVFMAC(e.Data["pf"], vf, mac)
	if errors.Is(err, errNoPF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("device %s: put its MAC %s back (VF %d of %s): %w", e.ID, mac, vf, e.Data["pf"], err)
	}
	return nil
}
