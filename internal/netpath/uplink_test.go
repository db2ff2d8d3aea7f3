package netpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

// recordedOps records what restoreNIC asks of a NIC.
type recordedOps struct{ calls []string }

func (o *recordedOps) add(f string, a ...any) error {
	o.calls = append(o.calls, fmt.Sprintf(f, a...))
	return nil
}
func (o *recordedOps) SetUp(up bool) error          { return o.add("up=%v", up) }
func (o *recordedOps) SetMTU(mtu int) error         { return o.add("mtu=%d", mtu) }
func (o *recordedOps) SetPromisc(on bool) error     { return o.add("promisc=%v", on) }
func (o *recordedOps) AddAddr(p netip.Prefix) error { return o.add("+addr %s", p) }
func (o *recordedOps) DelAddr(p netip.Prefix) error { return o.add("-addr %s", p) }
func (o *recordedOps) AddRoute(r nicRoute) error    { return o.add("+route %s via %s", r.Dst, r.Gw) }
func (o *recordedOps) DetachXDP() error             { return o.add("-xdp") }

func TestUplinkRestoreNIC(t *testing.T) {
	lab := netip.MustParsePrefix("198.18.250.1/24")
	route := nicRoute{Dst: netip.MustParsePrefix("198.18.251.0/24"), Gw: netip.MustParseAddr("198.18.250.254")}
	recorded := nicState{Up: true, MTU: 9000, Addrs: []netip.Prefix{lab}, Routes: []nicRoute{route}}
	for _, c := range []struct {
		name string
		have nicState
		want []string
	}{
		{"as recorded: left alone", recorded, nil},
		{"back from the run's namespace, down and bare",
			nicState{MTU: 9000},
			[]string{"+addr 198.18.250.1/24", "up=true", "+route 198.18.251.0/24 via 198.18.250.254"}},
		{"what the run changed is undone, down first",
			nicState{Up: true, MTU: 1500, Promisc: true, XDP: 7,
				Addrs: []netip.Prefix{lab, netip.MustParsePrefix("198.18.128.1/19")}, Routes: []nicRoute{route}},
			[]string{"up=false", "-xdp", "mtu=9000", "promisc=false", "-addr 198.18.128.1/19", "up=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops := &recordedOps{}
			if err := restoreNIC(ops, recorded, c.have); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ops.calls, c.want) {
				t.Errorf("restore did %q, want %q", ops.calls, c.want)
			}
		})
	}
	t.Run("a NIC recorded down stays down, its XDP program kept", func(t *testing.T) {
		ops := &recordedOps{}
		if err := restoreNIC(ops, nicState{MTU: 1500, XDP: 3}, nicState{Up: true, MTU: 1500, XDP: 3}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"up=false"}; !slices.Equal(ops.calls, want) {
			t.Errorf("restore did %q, want %q", ops.calls, want)
		}
	})
}

func TestUplinkRefusal(t *testing.T) {
	mgmt := netip.MustParseAddr("198.18.250.1")
	peer := netip.MustParseAddr("198.18.251.9")
	for _, c := range []struct {
		name  string
		facts uplinkFacts
		want  string // in the error; "" for none
	}{
		{"a lab NIC with an address of its own", uplinkFacts{NIC: "lab0", Index: 3, Addrs: []netip.Addr{netip.MustParseAddr("198.18.252.1")},
			DefaultVia: []int{2}, Management: []netip.Addr{mgmt}, Peer: peer, PeerVia: 2}, ""},
		{"the default route", uplinkFacts{NIC: "eth0", Index: 2, DefaultVia: []int{2}}, "eth0: it carries the host's default route"},
		{"a default route's nexthop", uplinkFacts{NIC: "eth1", Index: 3, DefaultVia: []int{2, 3}}, "eth1: it carries the host's default route"},
		{"the management address", uplinkFacts{NIC: "eth1", Index: 3, Addrs: []netip.Addr{mgmt}, DefaultVia: []int{2}, Management: []netip.Addr{mgmt}},
			"eth1: it holds 198.18.250.1, the host's management address"},
		{"the SSH session to the peer", uplinkFacts{NIC: "eth1", Index: 3, DefaultVia: []int{2}, Peer: peer, PeerVia: 3},
			"eth1: the SSH session to the peer 198.18.251.9 leaves by it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.facts.refusal()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrUplinkRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refusal %v, want %q", err, c.want)
			}
		})
	}
}

func TestUplinkPaths(t *testing.T) {
	// Several paths are taken in turn, one network each.
	for _, ok := range [][]Path{{Routed}, {Bridge, Bridge}, {Direct, Macvlan}, {Macvtap}, {OVS}, {XDP}, {TC}, {Routed, Bridge, Macvtap}} {
		if err := CheckUplinkPaths(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, c := range []struct {
		paths []Path
		want  string
	}{
		{[]Path{Routed, User}, "user: its host side confines passt's sockets"},
		{[]Path{Direct}, "no guest is on a data path"},
		{[]Path{User}, "user: its host side confines passt's sockets"},
		{[]Path{Veth}, "veth: its guests' links end in the peer"},
	} {
		err := CheckUplinkPaths(c.paths)
		if !errors.Is(err, ErrUplinkPath) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.paths, err, c.want)
		}
	}
	if got := UplinkPaths(); !slices.Contains(got, Bridge) || !slices.Contains(got, OVS) || slices.Contains(got, Veth) {
		t.Errorf("paths taking a NIC: %v", got)
	}
}

// TestUplinkRefusesInANamespace reads the refusals' facts from a
// namespace with a default route of its own, as the host's would be.
func TestUplinkRefusesInANamespace(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	ns, err := createNamed(led, "vfleet-"+runKey()+"-refuse")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.close(); _ = deleteNamed(ns.name); _ = led.Done(ns.entry) }()
	if err := setUp(ns.nl, "lo"); err != nil {
		t.Fatal(err)
	}
	// Two veth pairs inside: mgmt0 carries the default route, lab0 the
	// route to the peer.
	for _, p := range []struct{ name, far, addr string }{{"mgmt0", "mgmt1", "198.18.250.1/24"}, {"lab0", "lab1", "198.18.252.1/24"}} {
		if err := vethPair(ns, p.name, nil, ns, p.far, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := addAddr(ns.nl, p.name, netip.MustParsePrefix(p.addr)); err != nil {
			t.Fatal(err)
		}
	}
	lab, err := ns.nl.LinkByName("lab0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.nl.RouteAdd(&netlink.Route{Gw: net.ParseIP("198.18.250.254")}); err != nil {
		t.Fatal(err)
	}
	peer := netip.MustParseAddr("198.18.253.9")
	if err := ns.nl.RouteAdd(&netlink.Route{LinkIndex: lab.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("198.18.253.0/24")),
		Gw: net.ParseIP("198.18.252.254")}); err != nil {
		t.Fatal(err)
	}
	err = checkUplinkIn(ns.nl, "mgmt0", netip.Addr{})
	for _, want := range []string{"mgmt0: it carries the host's default route", "it holds 198.18.250.1, the host's management address"} {
		if !errors.Is(err, ErrUplinkRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("mgmt0: %v, want %q", err, want)
		}
	}
	if err := checkUplinkIn(ns.nl, "lab0", netip.Addr{}); err != nil {
		t.Errorf("lab0 with a local peer: %v", err)
	}
	err = checkUplinkIn(ns.nl, "lab0", peer)
	if want := "lab0: the SSH session to the peer 198.18.253.9 leaves by it"; !errors.Is(err, ErrUplinkRefused) || !strings.Contains(err.Error(), want) {
		t.Errorf("lab0 with the peer behind it: %v, want %q", err, want)
	}
}

// uplinkLab is the remote machine's dedicated NIC made ready for a run:
// the far end answers at every path's peer address, and routes the
// routed path's guests back; the host's end is given a state of its own
// (MTU, promiscuity, a static route) for the run to put back.
func uplinkLab(t *testing.T) (*testutil.Remote, nicState) {
	t.Helper()
	r := testutil.RemoteMachine(t)
	far, err := netns.GetFromPath(r.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	fh, err := netlink.NewHandleAt(far)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	eth, err := fh.LinkByName(r.NIC.PeerName)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range UplinkPaths() {
		u := specOf(p).uplink()
		if err := fh.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(u.Peer)}); err != nil {
			t.Fatal(err)
		}
		for _, dst := range u.Routes {
			if err := fh.RouteAdd(&netlink.Route{Dst: ipNet(dst), Gw: net.IP(u.Host.Addr().AsSlice())}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := netlink.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nic, err := h.LinkByName(r.NIC.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetMTU(nic, 1600); err != nil {
		t.Fatal(err)
	}
	if err := h.SetPromiscOn(nic); err != nil {
		t.Fatal(err)
	}
	host := netip.PrefixFrom(r.NIC.PeerAddr.Addr(), 32)
	if err := h.RouteAdd(&netlink.Route{LinkIndex: nic.Attrs().Index, Dst: ipNet(host), Priority: 7}); err != nil {
		t.Fatal(err)
	}
	return r, nicStateOf(t, r.NIC.Name)
}

// nicStateOf reads a NIC of this namespace as the ledger records it.
func nicStateOf(t *testing.T, name string) nicState {
	t.Helper()
	h, err := netlink.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("NIC %s is not back in the host's namespace: %v", name, err)
	}
	s, err := readNICState(h, l)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUplinkCarriesPathsOverANIC runs each path that takes a dedicated
// NIC over the remote machine's, TCP both ways between a guest and the far
// end, and checks the NIC is put back as it was.
func TestUplinkCarriesPathsOverANIC(t *testing.T) {
	r, want := uplinkLab(t)
	port := echoServer(t, r.NetNS)
	for _, p := range []Path{Routed, Bridge, Macvlan, OVS, XDP, TC} {
		t.Run(string(p), func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			defer testutil.CheckLeaks(t, before)
			led := newLedger(t)
			n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{p}, Uplink: r.NIC.Name})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := n.Close(); err != nil {
					t.Error(err)
				}
				if got := nicStateOf(t, r.NIC.Name); !reflect.DeepEqual(got, want) {
					t.Errorf("NIC after the run %+v, want %+v", got, want)
				}
				if p := led.Pending(); len(p) > 0 {
					t.Errorf("ledger still lists %v", p)
				}
			}()
			link, gns, err := n.Attach("g", p)
			if err != nil {
				t.Fatal(err)
			}
			if err := roundTrips(t, gns, netip.AddrPortFrom(link.Peer, uint16(port)), 3); err != nil {
				t.Fatalf("guest on %s to the far end %s over NIC %s: %v", p, link.Peer, r.NIC.Name, err)
			}
			gport := echoServer(t, gns)
			if err := roundTrips(t, r.NetNS, netip.AddrPortFrom(link.Addr.Addr(), uint16(gport)), 3); err != nil {
				t.Fatalf("far end to the guest %s on %s over NIC %s: %v", link.Addr, p, r.NIC.Name, err)
			}
			if c, ok, err := n.FastPathCounters(p); err != nil || (ok && c.Redirected == 0) {
				t.Errorf("the %s programs redirected nothing both ways over the NIC: %+v, %v", p, c, err)
			}
			// The NIC carries the path's program, in the mode its driver
			// takes (a veth: driver mode), and the guests' xdp programs
			// redirect to it since its far end has NAPI (uplinkLab).
			wantHook := map[Path]string{XDP: "xdp driver mode", TC: "tc clsact ingress"}[p]
			nicKey := "path." + string(p) + ".if." + r.NIC.Name
			if d := n.Describe(); !strings.HasPrefix(d[nicKey], wantHook) || (p == XDP && !strings.HasPrefix(d[nicKey+".sent_by"], "redirected")) {
				t.Errorf("the run's record of the NIC on %s: %q, sent by %q", p, d[nicKey], d[nicKey+".sent_by"])
			}
			if d := n.Describe()["path."+string(p)+".uplink"]; !strings.Contains(d, "NIC "+r.NIC.Name) {
				t.Errorf("the run's record says the uplink is %q", d)
			}
			// The peer is across the NIC: nothing local plays it, and the
			// baseline's floor is the NIC, not a direct link.
			if ns, d := n.PeerNS(), n.Describe(); ns != "" || d["paths"] != string(p) || d["peer"] != "across NIC "+r.NIC.Name {
				t.Errorf("a local peer was made: namespace %q, paths %q, peer %q", ns, d["paths"], d["peer"])
			}
		})
	}
}

// TestUplinkCleanPutsTheNICBack leaves a network on a NIC as a killed
// vfleet would, and undoes its ledger as `vfleet clean` does: the NIC
// comes back as recorded, without the fast paths' programs.
func TestUplinkCleanPutsTheNICBack(t *testing.T) {
	r, want := uplinkLab(t)
	for _, p := range []Path{Bridge, OVS, XDP, TC} {
		t.Run(string(p), func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			defer testutil.CheckLeaks(t, before)
			led := newLedger(t)
			n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{p}, Uplink: r.NIC.Name})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := n.Attach("g", p); err != nil {
				t.Fatal(err)
			}
			pending := led.Pending() // newest first, as clean undoes them
			if !slices.ContainsFunc(pending, func(e ledger.Entry) bool { return e.Kind == kindUplinkNIC }) {
				t.Fatalf("the NIC is not in the ledger: %v", pending)
			}
			for _, e := range pending {
				if err := ledger.Undo(context.Background(), e); err != nil {
					t.Fatalf("undo %s: %v", e.Describe(), err)
				}
				_ = led.Done(e)
			}
			if got := nicStateOf(t, r.NIC.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("NIC after clean %+v, want %+v", got, want)
			}
			// A tc filter goes with its qdisc, which the kernel shuts
			// down when the NIC leaves the host side.
			if qs, err := netlink.QdiscList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: nicIndex(t, r.NIC.Name)}}); err != nil {
				t.Fatal(err)
			} else if slices.ContainsFunc(qs, func(q netlink.Qdisc) bool { return q.Type() == "clsact" }) {
				t.Errorf("NIC after clean still has a clsact qdisc: %v", qs)
			}
			if err := n.Close(); err != nil { // releases handles; all is already undone
				t.Error(err)
			}
		})
	}
}

func nicIndex(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}
