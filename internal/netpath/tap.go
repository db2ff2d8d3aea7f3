package netpath

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// tapFlags are the flags a VM's tap is created and opened with: an
// Ethernet device, no packet-information prefix, and the virtio-net
// header in front of every frame, which lets checksum and segmentation
// offloads cross between the guest and the host side.
const tapFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR

// AttachTap gives a VM guest its interface on path p: a device named
// link.HostIf in the host side, with the addressing Attach would give a
// namespace guest (the guest configures link.Addr and link.Gateway itself,
// on the NIC with link.MAC). The device is the one the path's
// Spec.VMDevice names: a persistent tap the path then puts on itself, or a
// macvtap on the path's uplink. The VM's emulator opens it with
// OpenVMDevice. On a path that lends PCI devices (VMVFIO) there is none:
// link.HostIf is the address of the next device of Options.Passthrough,
// bound to vfio-pci by the path, and link.MAC a whole NIC's permanent one
// or the one the path sets on a virtual function.
//
// Which paths take VMs is each path's to say (Spec.NoVMs).
//
// The device lives in the host side's namespace and is deleted with it at
// Close, so it needs no ledger entry of its own: the namespace's entry
// already covers it, for Close and for `vfleet clean` alike. Close must come
// after the emulator is gone: an open tap holds the namespace alive.
func (n *Network) AttachTap(guestName string, p Path) (Link, error) {
	return n.attachVM(guestName, p, func(live Live, kind VMDevice, link *Link) error { return n.wireVMDevice(live, kind, *link) })
}

// attachVM gives a VM guest its link on path p and has wire make its
// device, which may name it otherwise.
func (n *Network) attachVM(guestName string, p Path, wire func(Live, VMDevice, *Link) error) (Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Link{}, errClosed
	}
	if err := CheckVMPath(p); err != nil {
		return Link{}, fmt.Errorf("guest %s: %w", guestName, err)
	}
	live, ok := n.live[p]
	if !ok || !n.hasPath(p) {
		return Link{}, fmt.Errorf("guest %s: path %s was not set up for this run", guestName, p)
	}
	_, dupNS := n.guests[guestName]
	if _, dupLink := n.links[guestName]; dupNS || dupLink {
		return Link{}, fmt.Errorf("guest %s is already attached", guestName)
	}
	link, err := LinkOf(p, n.counts[p])
	if err != nil {
		return Link{}, fmt.Errorf("guest %s: %w", guestName, err)
	}
	spec := specOf(p)
	switch spec.VMDevice {
	case VMMacvtap:
		// A namespace guest's macvlan is born in its own namespace; the
		// VM's macvtap stays in the host side and needs a name there.
		link.HostIf, link.HostMAC = spec.macvtapName(n.counts[p]), link.MAC
	case VMPasst:
		// No device: the VM's emulator reaches its passt by the socket.
		link.HostIf = passtSocket(n.sides, link.HostIf)
	case VMVFIO:
		if link.HostIf, link.MAC, err = n.sides.passthroughLink(n.counts[p], link.MAC); err != nil {
			return Link{}, fmt.Errorf("guest %s: %w", guestName, err)
		}
	}
	link.OffloadsOff = spec.VMOffloadsOff
	n.counts[p]++
	if err := wire(live, spec.VMDevice, &link); err != nil {
		return Link{}, fmt.Errorf("guest %s on path %s: %w", guestName, p, err)
	}
	n.links[guestName] = link
	return link, nil
}

// wireVMDevice makes the VM's device and puts it on its path; on error it
// deletes the device again, so a failed attach leaves nothing behind.
func (n *Network) wireVMDevice(live Live, kind VMDevice, link Link) (err error) {
	if kind == VMPasst || kind == VMVFIO {
		// The path makes passt's socket, or lends the PCI device, itself;
		// there is no link to make.
		return live.AttachTap(nil, link)
	}
	h := n.host.nl
	create := n.createTap
	if kind == VMMacvtap {
		create = n.createMacvtap
	}
	dev, err := create(link)
	if dev != nil {
		defer func() {
			if err != nil {
				if derr := h.LinkDel(dev); derr != nil {
					err = errors.Join(err, fmt.Errorf("delete %s %s: %w", kind, link.HostIf, derr))
				}
			}
		}()
	}
	if err != nil {
		return err
	}
	if err := live.AttachTap(dev, link); err != nil {
		return err
	}
	// Up before the VM attaches: a tap has no carrier until the emulator
	// opens it, and the kernel keeps its routes until then.
	if err := h.LinkSetUp(dev); err != nil {
		return fmt.Errorf("set %s %s up: %w", kind, link.HostIf, err)
	}
	return nil
}

// createTap makes the VM's persistent tap in the host side, with the host
// end's MAC. A tap that exists is returned even with an error, for the
// caller to delete.
func (n *Network) createTap(link Link) (netlink.Link, error) {
	if err := n.host.do(func() error { return newPersistentTap(link.HostIf) }); err != nil {
		return nil, err
	}
	h := n.host.nl
	tap, err := h.LinkByName(link.HostIf)
	if err != nil {
		return nil, fmt.Errorf("find tap %s: %w", link.HostIf, err)
	}
	if err := h.LinkSetHardwareAddr(tap, link.HostMAC); err != nil {
		return tap, fmt.Errorf("mac of tap %s: %w", link.HostIf, err)
	}
	return tap, nil
}

// newPersistentTap makes a persistent tap in the calling thread's
// namespace. The descriptor is closed at once: persistence keeps the
// device until its namespace goes, and the VM's emulator opens it again by
// name.
func newPersistentTap(name string) error {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap %s: open /dev/net/tun: %w", name, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("tap %s: %w", name, err)
	}
	// IFF_TUN_EXCL: a device of that name already there is a bug, not
	// something to attach to.
	ifr.SetUint16(tapFlags | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap %s: create (TUNSETIFF): %w", name, os.NewSyscallError("ioctl", err))
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("tap %s: make persistent (TUNSETPERSIST): %w", name, os.NewSyscallError("ioctl", err))
	}
	return nil
}

// OpenVMDevice opens the VM device called name (a tap or a macvtap) in the
// network namespace at nsPath, for the VM's emulator to inherit, and says
// which kind it is. The descriptor carries the virtio-net header and keeps
// working in any namespace. It is non-blocking, as emulators use it: tun
// runs a native XDP program only on frames written without blocking.
//
// A name with a slash, which no interface's name has, is the path of
// passt's socket (VMPasst): the descriptor is a stream connected to it,
// carrying each frame behind its length as a 32-bit big-endian number,
// without a virtio-net header. A unix socket is reached by its path from
// any namespace.
//
// A PCI address (VMVFIO) opens nothing: the emulator opens the device's
// vfio group itself, and the returned file is nil.
func OpenVMDevice(nsPath, name string) (*os.File, VMDevice, error) {
	if IsPCIAddress(name) {
		return nil, VMVFIO, nil
	}
	if strings.ContainsRune(name, '/') {
		f, err := connectPasst(name)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", VMPasst, err)
		}
		return f, VMPasst, nil
	}
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, 0, fmt.Errorf("vm device %s: open network namespace %s: %w", name, nsPath, err)
	}
	defer target.Close()
	// TUNSETIFF on a missing name would quietly make a new, unconnected
	// tap, so the device must be there, and be of a kind a VM takes, first.
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return nil, 0, fmt.Errorf("vm device %s: netlink into %s: %w", name, nsPath, err)
	}
	l, err := h.LinkByName(name)
	h.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("vm device %s in %s: %w", name, nsPath, err)
	}
	var (
		f    *os.File
		kind VMDevice
	)
	switch l := l.(type) {
	case *netlink.Tuntap:
		if l.Mode != netlink.TUNTAP_MODE_TAP {
			return nil, 0, fmt.Errorf("%s in %s is a tun device; a VM's NIC needs a tap or a macvtap", name, nsPath)
		}
		kind = VMTap
		err = nsthread.Do(target, func() (err error) {
			f, err = attachTap(name)
			return err
		})
	case *netlink.Macvtap:
		kind = VMMacvtap
		f, err = openMacvtap(target, name, l.Attrs().Index)
	default:
		return nil, 0, fmt.Errorf("%s in %s is a %s device; a VM's NIC needs a tap or a macvtap", name, nsPath, l.Type())
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, 0, fmt.Errorf("%s %s in %s: %w", kind, name, nsPath, err)
	}
	return f, kind, nil
}

// attachTap opens /dev/net/tun and attaches it to the tap called name in
// the calling thread's namespace.
func attachTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(tapFlags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach (TUNSETIFF): %w: another process has it open", err)
		}
		return nil, fmt.Errorf("attach (TUNSETIFF): %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// connectPasst connects to passt's socket at path. The connection is
// made blocking, as passt listens with no backlog, and then made
// non-blocking as emulators use it.
func connectPasst(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect to %s: %w", path, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("socket of %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), "passt:"+path), nil
}
