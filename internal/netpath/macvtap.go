package netpath

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// macvtapName names the n-th VM's macvtap on a path, in the host side
// beside the host ends of other paths' links (r0, b0, …): the path's index
// keeps two macvlan paths' macvtaps apart.
func (s Spec) macvtapName(n int) string { return fmt.Sprintf("mvtap%d-%d", s.Index, n) }

// createMacvtap makes the VM's macvtap on its path's uplink host end, in
// bridge mode so that it reaches the path's other guests too. It has the
// guest's MAC: macvlan hands a child only the unicast frames for its own
// address, so the VM's NIC must use the same one.
func (n *Network) createMacvtap(link Link) (netlink.Link, error) {
	h := n.host.nl
	uplink := n.sides.uplinkIf(specOf(link.Path))
	parent, err := h.LinkByName(uplink)
	if err != nil {
		return nil, fmt.Errorf("macvtap %s: find its uplink %s: %w", link.HostIf, uplink, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.HardwareAddr, attrs.ParentIndex = link.HostIf, link.MAC, parent.Attrs().Index
	if err := h.LinkAdd(&netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}}); err != nil {
		return nil, fmt.Errorf("macvtap %s on %s: %w", link.HostIf, uplink, err)
	}
	dev, err := h.LinkByName(link.HostIf)
	if err != nil {
		return nil, fmt.Errorf("find macvtap %s: %w", link.HostIf, err)
	}
	return dev, nil
}

// openMacvtap opens the character device of the macvtap name, ifindex in
// namespace ns.
//
// The kernel names that device /dev/tap<ifindex> in the root /dev, but
// ifindexes are per namespace: another namespace's macvtap can have the
// same number and so the same name, and the node may be someone else's.
// What identifies the device is its number, which sysfs gives only as
// seen from the network namespace its mount was made in. So a thread in
// ns makes a sysfs mount, and a tmpfs mount holds a node of our own for
// the number; both are detached (fsopen, fsmount): attached to no mount
// tree, reached only through their descriptors, seen by no one else, and
// gone with those descriptors, even if this process dies.
func openMacvtap(ns netns.NsHandle, name string, ifindex int) (*os.File, error) {
	devFile := filepath.Join("class", "net", name, "macvtap", fmt.Sprintf("tap%d", ifindex), "dev")
	var number []byte
	err := nsthread.Do(ns, func() error {
		sys, err := detachedMount("sysfs", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_NODEV)
		if err != nil {
			return err
		}
		defer unix.Close(sys)
		fd, err := unix.Openat(sys, devFile, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open sysfs %s: %w", devFile, err)
		}
		f := os.NewFile(uintptr(fd), devFile)
		defer f.Close()
		number, err = io.ReadAll(f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("device number: %w", err)
	}
	var major, minor uint32
	if _, err := fmt.Sscanf(string(bytes.TrimSpace(number)), "%d:%d", &major, &minor); err != nil {
		return nil, fmt.Errorf("device number %q in sysfs %s: %w", bytes.TrimSpace(number), devFile, err)
	}
	tmp, err := detachedMount("tmpfs", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(tmp)
	if err := unix.Mknodat(tmp, "macvtap", unix.S_IFCHR|0o600, int(unix.Mkdev(major, minor))); err != nil {
		return nil, fmt.Errorf("device node %d:%d: %w", major, minor, err)
	}
	fd, err := unix.Openat(tmp, "macvtap", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open device %d:%d: %w", major, minor, err)
	}
	f := os.NewFile(uintptr(fd), "macvtap:"+name)
	if err := checkMacvtapFD(fd, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// detachedMount makes a new mount of fstype, with MOUNT_ATTR_* attrs,
// attached nowhere, and returns the descriptor of its root. A sysfs shows
// the network namespace of the thread calling this.
func detachedMount(fstype string, attrs int) (int, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("new %s (fsopen): %w", fstype, err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("new %s (fsconfig create): %w", fstype, err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("new %s (fsmount): %w", fstype, err)
	}
	return fd, nil
}

// checkMacvtapFD asks the open device what it is attached to: the number
// read a moment ago could have been freed and given to another macvtap.
// It must also hand out frames as tapFlags says, which is a macvtap's
// default.
func checkMacvtapFD(fd int, name string) error {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		return fmt.Errorf("ask the opened device what it is (TUNGETIFF): %w", err)
	}
	if got := ifr.Name(); got != name {
		return fmt.Errorf("the opened device is attached to %s, not %s", got, name)
	}
	if flags := ifr.Uint16(); flags&tapFlags != tapFlags {
		return fmt.Errorf("the opened device has flags %#x, want at least %#x (tap, no packet information, virtio-net header)", flags, tapFlags)
	}
	return nil
}
