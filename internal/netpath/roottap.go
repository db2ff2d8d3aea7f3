package netpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
)

// kindRootTap is the ledger's entry for a VM's tap while it is in this
// host's own namespace, where deleting the run's namespaces would not
// remove it; its id is the tap's name there.
const kindRootTap = "root-tap"

func init() { ledger.RegisterUndo(kindRootTap, undoRootTap) }

// rootTapPrefix begins the name of every tap vfleet makes in this host's
// own namespace, so that an undo never deletes a device of another's.
const rootTapPrefix = "vfrt"

// rootTap is a VM's tap made in this host's namespace, waiting for its
// emulator to open it before it goes onto its path.
type rootTap struct {
	name  string
	live  Live
	link  Link
	entry ledger.Entry
}

// rootTapName is the tap's name in this host's namespace: unlike a name
// in the run's host side, it must not meet another run's or the host's
// own devices.
func rootTapName(runKey, guestName string) string {
	sum := sha256.Sum256([]byte(runKey + "\x00" + guestName))
	return rootTapPrefix + hex.EncodeToString(sum[:])[:11]
}

// RootTapAlias is the alias of a run's tap in this host's namespace.
func RootTapAlias(runKey, guestName string) string {
	return "vfleet run " + runKey + ", guest " + guestName
}

func setAlias(name, alias string) error {
	l, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetAlias(l, alias)
	}
	if err != nil {
		return fmt.Errorf("tap %s: alias: %w", name, err)
	}
	return nil
}

// AttachRootTap is AttachTap for a VM whose emulator opens its tap by
// name in this host's own namespace, as libvirt's QEMU does, started by
// libvirtd there: the tap is made there, recorded in the ledger first, and
// goes onto its path only at WireRootTap, once the emulator holds it (a
// tap keeps working when it changes namespace while open). It returns the
// guest's link and the tap's name in this host's namespace. Only a path
// whose VM device is a tap takes such a VM.
func (n *Network) AttachRootTap(guestName string, p Path) (Link, string, error) {
	if err := CheckRootTapPath(p); err != nil {
		return Link{}, "", fmt.Errorf("guest %s: %w", guestName, err)
	}
	name := rootTapName(n.key, guestName)
	link, err := n.attachVM(guestName, p, func(live Live, _ VMDevice, link *Link) error {
		// The emulator has it by this name, which it keeps on its path.
		link.HostIf = name
		entry, err := n.led.Record(kindRootTap, name, nil)
		if err != nil {
			return err
		}
		if err := newPersistentTap(name); err != nil {
			return errors.Join(err, n.led.Release(context.Background(), entry))
		}
		// Its name is a hash: the alias tells whoever lists this host's
		// devices (ip link, a test's leak check) whose it is.
		if err := setAlias(name, RootTapAlias(n.key, guestName)); err != nil {
			return errors.Join(err, n.led.Release(context.Background(), entry))
		}
		n.rootTaps[guestName] = rootTap{name: name, live: live, link: *link, entry: entry}
		return nil
	})
	return link, name, err
}

// WireRootTap moves a guest's tap from this host's namespace into the
// host side and puts it on its path, as AttachTap would have at once.
func (n *Network) WireRootTap(guestName string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.rootTaps[guestName]
	if !ok {
		return fmt.Errorf("guest %s has no tap waiting in this host's namespace", guestName)
	}
	tap, err := netlink.LinkByName(t.name)
	if err != nil {
		return fmt.Errorf("find tap %s: %w", t.name, err)
	}
	if err := netlink.LinkSetNsFd(tap, int(n.host.handle)); err != nil {
		return fmt.Errorf("move tap %s into the host side: %w", t.name, err)
	}
	// From here the host side holds it, and its namespace's entry covers it.
	delete(n.rootTaps, guestName)
	if err := n.led.Done(t.entry); err != nil {
		return err
	}
	h := n.host.nl
	if tap, err = h.LinkByName(t.name); err != nil {
		return fmt.Errorf("find tap %s in the host side: %w", t.name, err)
	}
	if err := h.LinkSetHardwareAddr(tap, t.link.HostMAC); err != nil {
		return fmt.Errorf("mac of tap %s: %w", t.link.HostIf, err)
	}
	if err := t.live.AttachTap(tap, t.link); err != nil {
		return fmt.Errorf("guest %s on path %s: %w", guestName, t.link.Path, err)
	}
	if err := h.LinkSetUp(tap); err != nil {
		return fmt.Errorf("set tap %s up: %w", t.link.HostIf, err)
	}
	return nil
}

// closeRootTaps deletes the taps no emulator took into the host side.
func (n *Network) closeRootTaps() error {
	var errs []error
	for guestName, t := range n.rootTaps {
		if err := n.led.Release(context.Background(), t.entry); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.rootTaps, guestName)
	}
	return errors.Join(errs...)
}

// undoRootTap deletes a tap vfleet made in this host's namespace, if it
// is still there (WireRootTap moved it, or it went with its emulator).
func undoRootTap(_ context.Context, e ledger.Entry) error {
	if !strings.HasPrefix(e.ID, rootTapPrefix) {
		return fmt.Errorf("ledger names tap %q, which is none of vfleet's", e.ID)
	}
	l, err := netlink.LinkByName(e.ID)
	var missing netlink.LinkNotFoundError
	if errors.As(err, &missing) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find tap %s: %w", e.ID, err)
	}
	if _, ok := l.(*netlink.Tuntap); !ok {
		return fmt.Errorf("%s is a %s device, not the tap vfleet made", e.ID, l.Type())
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete tap %s: %w", e.ID, err)
	}
	return nil
}
