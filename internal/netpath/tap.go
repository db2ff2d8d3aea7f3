package netpath

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TapFlags are the flags a VM's tap is created and opened with: an
// Ethernet device, no packet-information prefix, and the virtio-net
// header in front of every frame, which lets checksum and segmentation
// offloads cross between the guest and the host side.
const TapFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR

// AttachTap gives a VM guest its interface on path p: a persistent tap
// device named link.HostIf in the host side, with the addressing Attach
// would give a namespace guest (the guest configures link.Addr and
// link.Gateway itself, on the NIC with link.MAC). The VM's emulator opens
// the tap by name from inside the host side (see HostSide).
//
// Which paths take VMs is each path's to say (Spec.NoVMs).
//
// The tap lives in the host side's namespace and is deleted with it at
// Close, so it needs no ledger entry of its own: the namespace's entry
// already covers it, for Close and for `vfleet clean` alike. Close must come
// after the emulator is gone: an open tap holds the namespace alive.
func (n *Network) AttachTap(guestName string, p Path) (Link, error) {
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
	n.counts[p]++
	if err := n.wireTap(live, link); err != nil {
		return Link{}, fmt.Errorf("guest %s on path %s: %w", guestName, p, err)
	}
	n.links[guestName] = link
	return link, nil
}

// wireTap creates the tap and puts it on its path; on error it deletes the
// tap again, so a failed attach leaves no device behind.
func (n *Network) wireTap(live Live, link Link) (err error) {
	if err := n.host.do(func() error { return createTap(link.HostIf) }); err != nil {
		return err
	}
	h := n.host.nl
	tap, err := h.LinkByName(link.HostIf)
	if err != nil {
		return fmt.Errorf("find tap %s: %w", link.HostIf, err)
	}
	defer func() {
		if err != nil {
			if derr := h.LinkDel(tap); derr != nil {
				err = errors.Join(err, fmt.Errorf("delete tap %s: %w", link.HostIf, derr))
			}
		}
	}()
	if err := h.LinkSetHardwareAddr(tap, link.HostMAC); err != nil {
		return fmt.Errorf("mac of tap %s: %w", link.HostIf, err)
	}
	if err := live.AttachTap(tap, link); err != nil {
		return err
	}
	// Up before the VM attaches: the tap has no carrier until the emulator
	// opens it, and the kernel keeps its routes until then.
	if err := h.LinkSetUp(tap); err != nil {
		return fmt.Errorf("set tap %s up: %w", link.HostIf, err)
	}
	return nil
}

// createTap makes a persistent tap in the calling thread's namespace. The
// descriptor is closed at once: persistence keeps the device until its
// namespace goes, and the VM's emulator opens it again by name.
func createTap(name string) error {
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
	ifr.SetUint16(TapFlags | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap %s: create (TUNSETIFF): %w", name, os.NewSyscallError("ioctl", err))
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("tap %s: make persistent (TUNSETPERSIST): %w", name, os.NewSyscallError("ioctl", err))
	}
	return nil
}
