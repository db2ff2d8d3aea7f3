package netpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
)

// Passthrough: a PCI NIC of the host, or an SR-IOV virtual function, bound
// to vfio-pci and given to the VM whole (QEMU's vfio-pci device): the
// VM's own driver runs the hardware, and its frames go to the wire with
// no host stack, switch or emulator on the way. Its guests are on the
// switched segment of the path's uplink, which on a lab is the wire the
// NIC is cabled to (or, for a virtual function, its physical function's
// embedded switch) with the peer across it.
const Passthrough Path = "passthrough"

func init() { Register(passthrough{}) }

type passthrough struct{}

func (passthrough) Spec() Spec {
	return Spec{Name: Passthrough, Index: 10, Layout: LayoutSwitched, VMDevice: VMVFIO,
		NoNamespaces: "it gives a VM a PCI device of the host through vfio; a namespace guest has the host's kernel, " +
			"whose driver the device leaves"}
}

// hostRoot is where the host's sysfs and /dev are, for the path's real
// devices.
const hostRoot = "/"

func (p passthrough) Build(sides Sides) (Live, error) {
	return &passthroughLive{sides: sides, uplink: sides.uplinkIf(p.Spec())}, buildUplink(sides, p.Spec(), nil)
}

// passthroughLink gives the VM that is the n-th on the path its device
// (Sides.Passthrough, in order) and its NIC's MAC: QEMU sets none on a
// physical device, so a whole NIC keeps its permanent one, and a virtual
// function gets the VM's planned MAC, which lendDevice sets on it.
func (sd Sides) passthroughLink(n int, planned net.HardwareAddr) (string, net.HardwareAddr, error) {
	if n >= len(sd.Passthrough) {
		return "", nil, fmt.Errorf("%w: VM %d on the %s path has no device: the run lists %d", ErrPassthroughRefused, n+1, Passthrough, len(sd.Passthrough))
	}
	addr := sd.Passthrough[n]
	d, err := passthroughDevice(hostRoot, addr)
	if err != nil {
		return "", nil, err
	}
	if d.PhysFn != "" {
		return addr, planned, nil
	}
	return addr, d.Ifaces[0].MAC, nil
}

type passthroughLive struct {
	sides  Sides
	uplink string

	mu      sync.Mutex
	entries []ledger.Entry // the devices lent, in the order attached
	closed  bool
}

func (*passthroughLive) AttachNamespace(*namespace, Link) error {
	// Network.Attach refuses first, naming the reason.
	return CheckNamespacePath(Passthrough)
}

// AttachTap lends the VM its device (link.HostIf, a PCI address), its MAC
// link.MAC; Close, or `vfleet clean` after a crash, gives it back.
func (l *passthroughLive) AttachTap(_ netlink.Link, link Link) error {
	entries, err := lendDevice(l.sides.Ledger, hostRoot, fileWrites{}, netlinkVFs{}, link.HostIf, link.MAC)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entries...)
	return err
}

// lendDevice sets a virtual function's MAC to mac through its physical
// function, then binds the device at addr to vfio-pci, each after
// recording it in the ledger. It returns the entries recorded, in order,
// even with an error.
func lendDevice(led *ledger.Ledger, root string, w sysfsWrites, v vfMACs, addr string, mac net.HardwareAddr) ([]ledger.Entry, error) {
	d, err := passthroughDevice(root, addr)
	if err != nil {
		return nil, err
	}
	var entries []ledger.Entry
	keep := func(e ledger.Entry) {
		if e.Kind != "" {
			entries = append(entries, e)
		}
	}
	if d.PhysFn != "" {
		e, err := setVFMAC(led, v, addr, d.VF, mac)
		keep(e)
		if err != nil {
			return entries, err
		}
	}
	e, err := bindVFIO(led, root, w, addr)
	keep(e)
	return entries, err
}

// Describe keys:
//
//	vm_device  what a VM's NIC is
//	devices    the PCI addresses lent, in the order attached
func (l *passthroughLive) Describe() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var devices []string
	for _, e := range l.entries {
		if e.Kind == kindVFIODevice {
			devices = append(devices, e.ID+" (from "+cmp.Or(e.Data["driver"], "no driver")+")")
		}
	}
	return map[string]string{
		"vm_device": "a PCI device of the host bound to vfio-pci, the VM's own; on the wire of " + l.uplink + "'s segment",
		"devices":   strings.Join(devices, " "),
	}
}

// Close gives every device back to its driver, and every VF its MAC,
// newest first. The VMs
// must be gone: vfio-pci keeps a device a process holds open.
func (l *passthroughLive) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for i := len(l.entries) - 1; i >= 0; i-- {
		errs = append(errs, l.sides.Ledger.Release(context.Background(), l.entries[i]))
	}
	return errors.Join(errs...)
}
