package netpath

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestEveryPathHasDistinctSubnets(t *testing.T) {
	bench := netip.MustParsePrefix("198.18.0.0/15")
	type owned struct {
		prefix netip.Prefix
		what   string
	}
	var all []owned
	for _, p := range append([]Path{Direct}, GuestPaths()...) {
		s := specOf(p)
		if !s.Baseline {
			all = append(all, owned{s.block(), string(p) + " guests"})
		}
		u := UplinkOf(p)
		// A switched path's uplink lives in its own block; the veth
		// path has none.
		if s.Layout == LayoutRouted || s.Layout == LayoutNAT {
			all = append(all, owned{u.Host.Masked(), string(p) + " uplink"})
		}
		if s.Layout != LayoutPeerLinks && (!bench.Contains(u.Host.Addr()) || !bench.Contains(u.Peer.Addr())) {
			t.Fatalf("%s uplink %v/%v outside the benchmarking range", p, u.Host, u.Peer)
		}
	}
	for i, a := range all {
		if !bench.Contains(a.prefix.Addr()) || a.prefix.Bits() < bench.Bits() {
			t.Errorf("%s: %s outside the benchmarking range", a.what, a.prefix)
		}
		for _, b := range all[i+1:] {
			if a.prefix.Overlaps(b.prefix) {
				t.Errorf("%s (%s) and %s (%s) overlap", a.what, a.prefix, b.what, b.prefix)
			}
		}
	}
}

// specOnly is a path that is never built.
type specOnly Spec

func (s specOnly) Spec() Spec              { return Spec(s) }
func (specOnly) Build(Sides) (Live, error) { return nil, errors.New("never built") }

func TestRegisterRefusesAnIndexBeyondThePlan(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "index") {
			t.Fatalf("registering index %d: recovered %v, want a panic about the index", maxPathIndex+1, r)
		}
		if _, err := lookup("beyond"); err == nil {
			t.Fatal("the refused path is registered")
		}
	}()
	Register(specOnly{Name: "beyond", Index: maxPathIndex + 1})
}

func TestRoutedLinksArePointToPointAndUnique(t *testing.T) {
	for _, p := range []Path{Routed, XDP, TC, Veth} {
		addrs := map[netip.Addr]bool{}
		macs := map[string]bool{}
		for n := 0; n < MaxGuestsPerPath; n++ {
			l, err := LinkOf(p, n)
			if err != nil {
				t.Fatal(err)
			}
			if l.Addr.Bits() != 30 || l.HostIP.Masked() != l.Addr.Masked() || l.Gateway != l.HostIP.Addr() {
				t.Fatalf("%s guest %d: %+v is not a /30 with the host side as gateway", p, n, l)
			}
			if !specOf(p).block().Contains(l.Addr.Addr()) {
				t.Fatalf("%s guest %d: %s outside the path's block %s", p, n, l.Addr, specOf(p).block())
			}
			for _, a := range []netip.Addr{l.Addr.Addr(), l.HostIP.Addr()} {
				if addrs[a] {
					t.Fatalf("%s guest %d: address %s used twice", p, n, a)
				}
				addrs[a] = true
			}
			for _, m := range []string{l.MAC.String(), l.HostMAC.String()} {
				if macs[m] {
					t.Fatalf("%s guest %d: MAC %s used twice", p, n, m)
				}
				macs[m] = true
			}
			if len(l.HostIf) > 15 {
				t.Fatalf("interface name %q longer than the kernel allows", l.HostIf)
			}
			if p == Veth {
				if l.Peer != l.Gateway {
					t.Fatalf("veth guest %d reaches the peer at %s, not across its link", n, l.Peer)
				}
			} else if l.Peer != UplinkOf(p).Peer.Addr() {
				t.Fatalf("%s guest %d reaches the peer at %s", p, n, l.Peer)
			}
		}
	}
}

func TestSwitchedGuestsShareThePeersSubnet(t *testing.T) {
	for _, p := range []Path{Bridge, Macvlan, OVS} {
		up := UplinkOf(p)
		last, err := LinkOf(p, MaxGuestsPerPath-1)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := LinkOf(p, 0)
		for _, l := range []Link{first, last} {
			if l.Addr.Masked() != up.Peer.Masked() || l.Gateway.IsValid() {
				t.Fatalf("%s: guest %s not on the peer's segment %s", p, l.Addr, up.Peer)
			}
			if l.Addr.Addr() == up.Host.Addr() || l.Addr.Addr() == up.Peer.Addr() {
				t.Fatalf("%s: guest takes the host side's or the peer's address", p)
			}
		}
		if p == Macvlan && first.HostIf != "" {
			t.Fatalf("macvlan guests have no host-side device, got %q", first.HostIf)
		}
	}
}

func TestLinkOfRejectsOutOfRange(t *testing.T) {
	if _, err := LinkOf(Routed, MaxGuestsPerPath); err == nil {
		t.Fatal("guest beyond the path's block accepted")
	}
	if _, err := LinkOf(Direct, 0); err == nil {
		t.Fatal("a guest on the baseline's direct link accepted")
	}
	if _, err := ParsePath("vxlan"); err == nil {
		t.Fatal("unknown path accepted")
	}
	if p, err := ParsePath("xdp"); err != nil || p != XDP {
		t.Fatalf("ParsePath(xdp) = %v, %v", p, err)
	}
}
