package netpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
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

// createNamed makes a named namespace, recorded in the ledger first. The
// creating thread is moved back before anything else can run on it, and
// retired if that fails, so no goroutine ever runs in the wrong namespace.
func createNamed(led *ledger.Ledger, name string) (*namespace, error) {
	entry, err := led.Record(kindNetns, name, nil)
	if err != nil {
		return nil, err
	}
	type result struct {
		h   netns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open the current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			// Stay locked: the runtime retires this thread with the goroutine.
			done <- result{h: h, err: errors.Join(err, fmt.Errorf("return to the original network namespace: %w", serr))}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h: h, err: err}
	}()
	r := <-done
	if r.err != nil {
		if r.h.IsOpen() {
			r.h.Close()
		}
		_ = deleteNamed(name)
		_ = led.Done(entry)
		return nil, fmt.Errorf("create network namespace %s: %w", name, r.err)
	}
	h, err := netlink.NewHandleAt(r.h)
	if err != nil {
		r.h.Close()
		_ = deleteNamed(name)
		_ = led.Done(entry)
		return nil, fmt.Errorf("netlink into namespace %s: %w", name, err)
	}
	return &namespace{entry: entry, name: name, handle: r.h, nl: h}, nil
}

func (n *namespace) close() {
	n.nl.Close()
	n.handle.Close()
}

// do runs fn on a thread inside the namespace: for what netlink cannot do
// (sysctls under /proc/sys/net and counters under /proc/net are those of the
// reading thread's namespace).
func (n *namespace) do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s: %w", n.name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("leave network namespace %s: %w", n.name, err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
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
