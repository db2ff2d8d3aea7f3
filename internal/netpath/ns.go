package netpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/nsthread"
)

// kindNetns is the ledger kind of a named network namespace.
const kindNetns = "netns"

func init() { ledger.RegisterUndo(kindNetns, undoNetns) }

// nsDir is where named namespaces are bind-mounted, the place iproute2 and
// OCI runtimes look for them too.
const nsDir = "/run/netns"

// NSPath is the path of a named namespace, as guests join it.
func NSPath(name string) string { return filepath.Join(nsDir, name) }

func undoNetns(_ context.Context, e ledger.Entry) error { return deleteNamed(e.ID) }

// deleteNamed removes a named namespace's bind mount and file. It is
// idempotent and also clears the empty file a half-finished create leaves.
func deleteNamed(name string) error {
	path := NSPath(name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	return nil
}

// namespace is an open, named network namespace and a netlink handle into it.
type namespace struct {
	entry  ledger.Entry
	name   string
	handle netns.NsHandle
	nl     *netlink.Handle
}

// createNamed makes a named namespace, recorded in the ledger first.
// NewNamed moves the calling thread into the new namespace, so it runs on
// a thread of its own that nsthread brings back.
func createNamed(led *ledger.Ledger, name string) (*namespace, error) {
	entry, err := led.Record(kindNetns, name, nil)
	if err != nil {
		return nil, err
	}
	var handle netns.NsHandle
	err = nsthread.Do(netns.None(), func() (err error) {
		handle, err = netns.NewNamed(name)
		return err
	})
	if err != nil {
		if handle.IsOpen() {
			handle.Close()
		}
		_ = deleteNamed(name)
		_ = led.Done(entry)
		return nil, fmt.Errorf("create network namespace %s: %w", name, err)
	}
	h, err := netlink.NewHandleAt(handle)
	if err != nil {
		handle.Close()
		_ = deleteNamed(name)
		_ = led.Done(entry)
		return nil, fmt.Errorf("netlink into namespace %s: %w", name, err)
	}
	return &namespace{entry: entry, name: name, handle: handle, nl: h}, nil
}

func (n *namespace) close() {
	n.nl.Close()
	n.handle.Close()
}

// do runs fn on a thread inside the namespace: for what netlink cannot do
// (sysctls under /proc/sys/net and counters under /proc/net are those of the
// reading thread's namespace).
func (n *namespace) do(fn func() error) error {
	if err := nsthread.Do(n.handle, fn); err != nil {
		return fmt.Errorf("in network namespace %s: %w", n.name, err)
	}
	return nil
}

// readFile reads a file as seen from inside the namespace.
func (n *namespace) readFile(path string) ([]byte, error) {
	var b []byte
	err := n.do(func() error {
		var err error
		b, err = os.ReadFile(path)
		return err
	})
	return b, err
}

// sysctl writes a /proc/sys value of the namespace.
func (n *namespace) sysctl(key, value string) error {
	return n.do(func() error {
		path := filepath.Join("/proc/sys", filepath.FromSlash(key))
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n.name, err)
		}
		return nil
	})
}
