package netpath

import (
	"context"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/testutil"
)

// A run's namespaces have no link into vfleet's own, and a link someone
// adds from the host side to it is found.
func TestLinksIntoRootFindsOnlyWhatLeadsThere(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: newLedger(t), Paths: []Path{"bridge", "macvlan"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.Attach("g", "bridge"); err != nil {
		t.Fatal(err)
	}
	links, err := n.LinksIntoRoot()
	if err != nil || len(links) != 0 {
		t.Fatalf("a fresh run's links into the root namespace = %v, %v; want none", links, err)
	}
	// A veth with one end in the root namespace and the other moved into
	// the host side; no address, no traffic, removed at once.
	name := "vfl-rt" + runKey()[len(runKey())-4:]
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(veth)
	peer, err := netlink.LinkByName(name + "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(n.host.handle)); err != nil {
		t.Fatal(err)
	}
	links, err = n.LinksIntoRoot()
	if err != nil || len(links) != 1 || !strings.HasSuffix(links[0], "-hs/"+name+"p") {
		t.Fatalf("links into the root namespace = %v, %v; want the host side's %sp", links, err, name)
	}
}
