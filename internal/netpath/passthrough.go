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
// (Sides.Passthrough, in order) and the device's own MAC, which its NIC
// keeps: QEMU sets no MAC on a physical device.
func (sd Sides) passthroughLink(n int) (string, net.HardwareAddr, error) {
	if n >= len(sd.Passthrough) {
		return "", nil, fmt.Errorf("%w: VM %d on the %s path has no device: the run lists %d", ErrPassthroughRefused, n+1, Passthrough, len(sd.Passthrough))
	}
	addr := sd.Passthrough[n]
	d, err := passthroughDevice(hostRoot, addr)
	if err != nil {
		return "", nil, err
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

// AttachTap binds the VM's device (link.HostIf, a PCI address) to
// vfio-pci, after recording it and its driver in the ledger; Close, or
// `vfleet clean` after a crash, gives it back.
func (l *passthroughLive) AttachTap(_ netlink.Link, link Link) error {
	e, err := bindVFIO(l.sides.Ledger, hostRoot, fileWrites{}, link.HostIf)
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Kind != "" {
		l.entries = append(l.entries, e)
	}
	return err
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
		devices = append(devices, e.ID+" (from "+cmp.Or(e.Data["driver"], "no driver")+")")
	}
	return map[string]string{
		"vm_device": "a PCI device of the host bound to vfio-pci, the VM's own; on the wire of " + l.uplink + "'s segment",
		"devices":   strings.Join(devices, " "),
	}
}

// Close gives every device back to its driver, newest first. The VMs
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
