package netpath

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestRootTapOpenedThenWired: a VM's tap made in this host's namespace,
// opened there as libvirt's QEMU opens it, then moved onto its bridge
// path, still carries the peer's frames through the open descriptor; a
// tap nobody wired goes at Close, and one a crash left goes with the
// ledger's undo.
func TestRootTapOpenedThenWired(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{Bridge}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.AttachRootTap("vm-m", Macvtap); !errors.Is(err, ErrPathNotForVMs) {
		t.Errorf("a macvtap path: %v", err)
	}
	link, name, err := n.AttachRootTap("vm-a", Bridge)
	if err != nil {
		t.Fatal(err)
	}
	if link.HostIf != name || len(name) > 15 {
		t.Errorf("link %+v, tap %q", link, name)
	}
	if l, err := netlink.LinkByName(name); err != nil {
		t.Fatalf("tap %s not in this host's namespace: %v", name, err)
	} else if want := RootTapAlias(n.key, "vm-a"); l.Attrs().Alias != want {
		t.Errorf("tap %s has alias %q, want %q", name, l.Attrs().Alias, want)
	}
	f, err := attachTap(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := n.WireRootTap("vm-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(name); err == nil {
		t.Errorf("tap %s is still in this host's namespace", name)
	}
	l, err := n.host.nl.LinkByName(name)
	br, berr := n.host.nl.LinkByName(bridgeName)
	if err != nil || berr != nil || l.Attrs().MasterIndex != br.Attrs().Index || l.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("tap %s in the host side: %v %v %+v", name, err, berr, l)
	}
	var conn net.Conn
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(link.Addr.Addr(), 9).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err = waitARPFor(t, f, link.Addr.Addr(), func() { _, _ = conn.Write([]byte("x")) })
	conn.Close()
	if err != nil {
		t.Errorf("peer to the guest through the moved tap: %v", err)
	}

	_, unwired, err := n.AttachRootTap("vm-b", Bridge)
	if err != nil {
		t.Fatal(err)
	}
	_, crashed, err := n.AttachRootTap("vm-c", Bridge)
	if err != nil {
		t.Fatal(err)
	}
	if err := undoRootTap(context.Background(), ledger.Entry{Kind: kindRootTap, ID: crashed}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tap := range []string{unwired, crashed} {
		if _, err := netlink.LinkByName(tap); err == nil {
			t.Errorf("tap %s outlived the network", tap)
		}
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
	if err := undoRootTap(context.Background(), ledger.Entry{Kind: kindRootTap, ID: "eth0"}); err == nil {
		t.Error("the undo would delete a device that is not vfleet's")
	}
}
