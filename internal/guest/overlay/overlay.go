// Package overlay gives a guest its own copy-on-write view of the shared
// guest image: an overlayfs whose lower layer is the image's rootfs and
// whose upper layer lives in the guest's state directory, on disk, so that
// what a guest writes (file-I/O workloads included) lands on the same kind
// of filesystem for every guest kind.
//
// Every mount is recorded in the run's ledger before it is made, so a killed
// run's mounts are found and removed by `vfleet clean`.
package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Layer is a mounted overlay.
type Layer struct {
	Merged string // the guest's root filesystem
	entry  ledger.Entry
	led    *ledger.Ledger
}

// Mount creates upper, work and merged directories under dir and mounts
// the overlay there. dir must already be recorded in the ledger by the
// caller (it owns the guest's state directory).
func Mount(led *ledger.Ledger, lower, dir string) (*Layer, error) {
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
	}
	// overlayfs splits its options on commas and colons.
	for _, p := range []string{lower, upper, work} {
		if strings.ContainsAny(p, ",:") {
			return nil, fmt.Errorf("overlay: path %q contains ',' or ':', which overlayfs cannot take", p)
		}
	}
	e, err := led.Record(ledger.KindMount, merged, nil)
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		_ = led.Done(e)
		return nil, fmt.Errorf("mount overlay at %s: %w", merged, err)
	}
	// Private, so that mounts made below it (a baseline's /proc, /dev) do
	// not propagate to the host's other mount namespaces.
	if err := unix.Mount("", merged, "", unix.MS_PRIVATE, ""); err != nil {
		_ = unix.Unmount(merged, unix.MNT_DETACH)
		_ = led.Done(e)
		return nil, fmt.Errorf("make %s private: %w", merged, err)
	}
	return &Layer{Merged: merged, entry: e, led: led}, nil
}

// Bind recursively bind-mounts a host path at a path inside the layer and
// returns the undo. The bind is made a slave so that unmounting it later
// cannot propagate back to the host's own mount.
func (l *Layer) Bind(hostPath, guestPath string) (func() error, error) {
	target := filepath.Join(l.Merged, guestPath)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return nil, fmt.Errorf("bind %s: %w", guestPath, err)
	}
	e, err := l.led.Record(ledger.KindMount, target, nil)
	if err != nil {
		return nil, err
	}
	undo := func() error { return l.led.Release(context.Background(), e) }
	if err := unix.Mount(hostPath, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		_ = l.led.Done(e)
		return nil, fmt.Errorf("bind %s at %s: %w", hostPath, target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		_ = undo()
		return nil, fmt.Errorf("make %s slave: %w", target, err)
	}
	return undo, nil
}

// Unmount removes the overlay. It is idempotent.
func (l *Layer) Unmount() error { return l.led.Release(context.Background(), l.entry) }

// Supported reports whether the kernel under procRoot (/proc, or a
// fixture tree in tests) offers overlayfs.
func Supported(procRoot string) error {
	fss, err := procfs.Filesystems(procRoot)
	if err != nil {
		return err
	}
	if !fss["overlay"] {
		return errors.New("overlayfs is not available in this kernel (modprobe overlay)")
	}
	return nil
}
