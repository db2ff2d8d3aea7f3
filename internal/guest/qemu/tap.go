package qemu

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/nsthread"
)

// openTap opens the persistent tap name in the namespace at nsPath, for
// QEMU to inherit. A tap can only be opened by name from inside its own
// namespace, so a locked thread enters it; the descriptor keeps working
// in any namespace afterwards.
func openTap(nsPath, name string) (*os.File, error) {
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("tap %s: open network namespace %s: %w", name, nsPath, err)
	}
	defer target.Close()
	// TUNSETIFF on a missing name would quietly make a new, unconnected
	// tap, so the device must be there, and be a tap, first.
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return nil, fmt.Errorf("tap %s: netlink into %s: %w", name, nsPath, err)
	}
	l, err := h.LinkByName(name)
	h.Close()
	if err != nil {
		return nil, fmt.Errorf("tap %s in %s: %w", name, nsPath, err)
	}
	if t, ok := l.(*netlink.Tuntap); !ok || t.Mode != netlink.TUNTAP_MODE_TAP {
		return nil, fmt.Errorf("%s in %s is a %s device, not a tap", name, nsPath, l.Type())
	}
	var f *os.File
	err = nsthread.Do(target, func() (err error) {
		f, err = attachTap(name)
		return err
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	return f, nil
}

// attachTap opens /dev/net/tun and attaches it to the tap called name in
// the calling thread's namespace.
func attachTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(netpath.TapFlags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach (TUNSETIFF): %w: another process has it open", err)
		}
		return nil, fmt.Errorf("attach (TUNSETIFF): %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
