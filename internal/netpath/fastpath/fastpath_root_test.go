package fastpath

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// programIDs lists every BPF program the kernel has loaded.
func programIDs(t *testing.T) []ebpf.ProgramID {
	t.Helper()
	var ids []ebpf.ProgramID
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Fatalf("list BPF programs: %v", err)
		}
		ids = append(ids, next)
		id = next
	}
}

// waitProgramsGone waits until none of ids is loaded. The kernel frees a
// program once its last reference goes, and a deleted namespace drops its
// links' references from a work queue, hence a bounded wait rather than
// one look.
func waitProgramsGone(t *testing.T, ids []ebpf.ProgramID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []ebpf.ProgramID
		live := programIDs(t)
		for _, id := range ids {
			if slices.Contains(live, id) {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("programs %v are still loaded", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLoadCloseLeavesNoPrograms(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			fds := openFDs(t)
			s, err := Load(mode)
			if err != nil {
				t.Fatal(err)
			}
			ids := s.ProgramIDs()
			if want := map[Mode]int{XDP: 2, TC: 1}[mode]; len(ids) != want {
				t.Fatalf("%d programs loaded, want %d", len(ids), want)
			}
			live := programIDs(t)
			for _, id := range ids {
				if !slices.Contains(live, id) {
					t.Fatalf("program %d is not in the kernel's list %v", id, live)
				}
			}
			c, err := s.Counters()
			if err != nil {
				t.Fatal(err)
			}
			if c.Redirected != 0 || c.Passed != 0 || len(c.PassedByReason) != len(reasonNames)-firstPassReason {
				t.Fatalf("fresh counters = %+v", c)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := s.Counters(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Counters after Close: %v, want ErrClosed", err)
			}
			waitProgramsGone(t, ids)
			if now := openFDs(t); now != fds {
				t.Errorf("%d file descriptors open before Load, %d after Close", fds, now)
			}
		})
	}
}

// TestForwardsGuestToPeer runs TCP between two guests and the peer through
// each fast path and checks that the fast path, not the host side's IP
// forwarding, carried it. The same traffic first goes through plain
// forwarding, which proves the forwarding counter would have caught a fast
// path that passed everything on.
func TestForwardsGuestToPeer(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			// Cleanups run last in, first out: this one after the
			// topology's and the Set's.
			before := testutil.TakeSnapshot(t)
			t.Cleanup(func() { testutil.CheckLeaks(t, before) })
			tp := newTopology(t, 2)
			startEcho(t, tp.peer)
			const size = 1 << 20

			// Routed: the stack forwards every segment.
			f0 := mustForwarded(t, tp.hs)
			if err := echo(tp.guests[0], size); err != nil {
				t.Fatal(err)
			}
			// GRO on the veths may merge segments before they are
			// forwarded, up to 64 KiB each: fewer datagrams than an MTU's
			// worth, never fewer than that.
			if d := mustForwarded(t, tp.hs) - f0; d < size/(64<<10) {
				t.Fatalf("plain forwarding counted %d datagrams for %d bytes echoed", d, size)
			}

			s, err := Load(mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				waitProgramsGone(t, s.ProgramIDs())
			})
			if err := s.Attach(tp.hs.h, "g0", tp.peer.h, "eth0"); err == nil || !strings.Contains(err.Error(), "not its peer") {
				t.Fatalf("g0 attached with the peer's eth0 as its far end: %v", err)
			}
			if err := s.Attach(tp.hs.h, "up0", tp.peer.h, "eth0"); err != nil {
				t.Fatal(err)
			}
			for i, g := range tp.guests {
				if err := s.Attach(tp.hs.h, fmt.Sprintf("g%d", i), g.h, "eth0"); err != nil {
					t.Fatal(err)
				}
			}
			desc := s.Describe()
			if err := s.Attach(tp.hs.h, "g0", tp.guests[0].h, "eth0"); err != nil {
				t.Fatalf("attach again: %v", err)
			}
			if again := s.Describe(); len(again) != len(desc) {
				t.Fatalf("attaching again changed the description:\n%v\n%v", desc, again)
			}
			if err := s.Attach(tp.hs.h, "g0", tp.guests[1].h, "eth0"); err == nil {
				t.Fatal("g0 attached a second time with another far end")
			}
			checkDescription(t, mode, desc)

			// Warm up: neighbours on the new paths get resolved by the stack.
			for _, g := range tp.guests {
				if err := echo(g, 4096); err != nil {
					t.Fatal(err)
				}
			}
			c0 := mustCounters(t, s)
			if c0.PassedByReason["not_ipv4"] == 0 {
				t.Errorf("no ARP or other non-IPv4 frame was passed to the stack: %v", c0)
			}
			f0 = mustForwarded(t, tp.hs)
			for _, g := range tp.guests {
				if err := echo(g, size); err != nil {
					t.Fatal(err)
				}
			}
			c := mustCounters(t, s).Sub(c0)
			forwarded := mustForwarded(t, tp.hs) - f0
			t.Logf("%s: %v; host side forwarded %d", mode, c, forwarded)
			// Every segment each way, fewer if GSO (tc) or GRO batch them.
			if c.Redirected < 2*2*size/65536 {
				t.Errorf("the fast path redirected %d packets for 2x%d bytes echoed", c.Redirected, size)
			}
			if c.Dropped != 0 {
				t.Errorf("the fast path dropped %d packets", c.Dropped)
			}
			if forwarded != 0 {
				t.Errorf("the host side still forwarded %d datagrams (fast path passed %v)", forwarded, c.PassedByReason)
			}

			// Forget the host side's neighbours: the fast path must hand
			// the next packets to the stack, which resolves them again.
			neighs, err := tp.hs.nl.NeighList(0, unix.AF_INET)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range neighs {
				if err := tp.hs.nl.NeighDel(&n); err != nil {
					t.Fatalf("delete neighbour %v: %v", n.IP, err)
				}
			}
			c0 = mustCounters(t, s)
			for _, g := range tp.guests {
				if err := echo(g, 4096); err != nil {
					t.Fatalf("after the neighbours were deleted: %v", err)
				}
			}
			c = mustCounters(t, s).Sub(c0)
			if c.PassedByReason["fib_no_neigh"] == 0 || c.PassedByReason["not_ipv4"] == 0 || c.Redirected == 0 {
				t.Errorf("after the neighbours were deleted: %v, want unresolved neighbours and ARP passed to the stack, the rest redirected", c)
			}
		})
	}
}

func checkDescription(t *testing.T, mode Mode, d map[string]string) {
	t.Helper()
	want := map[string]string{"mode": string(mode)}
	switch mode {
	case XDP:
		want["if.up0"] = "xdp driver mode, program vfleet_xdp_fwd"
		want["if.g0.far"] = "eth0: xdp driver mode, program vfleet_xdp_pass"
		want["if.g0.far.offload"] = "tx-checksumming=off"
		want["program.vfleet_xdp_pass"] = "id "
	case TC:
		want["if.up0"] = "tc clsact ingress, direct action, program vfleet_tc_fwd"
		want["if.g0.far"] = "eth0: nothing attached"
		want["if.g0.far.offload"] = "tx-checksumming=on"
	}
	for k, v := range want {
		if !strings.Contains(d[k], v) {
			t.Errorf("Describe()[%q] = %q, want it to contain %q", k, d[k], v)
		}
	}
}

// TestNamespacesGoneBeforeClose deletes a link and then every namespace
// before Close: Close must still succeed and release everything.
func TestNamespacesGoneBeforeClose(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			t.Cleanup(func() { testutil.CheckLeaks(t, before) })
			tp := newTopology(t, 1)
			s, err := Load(mode)
			if err != nil {
				t.Fatal(err)
			}
			ids := s.ProgramIDs()
			if err := s.Attach(tp.hs.h, "up0", tp.peer.h, "eth0"); err != nil {
				t.Fatal(err)
			}
			if err := s.Attach(tp.hs.h, "g0", tp.guests[0].h, "eth0"); err != nil {
				t.Fatal(err)
			}
			g0, err := tp.hs.nl.LinkByName("g0")
			if err != nil {
				t.Fatal(err)
			}
			if err := tp.hs.nl.LinkDel(g0); err != nil {
				t.Fatal(err)
			}
			if err := tp.remove(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close after the namespaces went: %v", err)
			}
			waitProgramsGone(t, ids)
		})
	}
}

// TestFailedAttachUndoes makes the host end refuse the program after the
// far end was prepared: the far end must be as it was, and the Set must
// hold nothing open in the namespaces.
func TestFailedAttachUndoes(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	tp := newTopology(t, 1)
	s, err := Load(XDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Someone else's XDP program on g0: Attach must not replace it.
	foreign, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	g0, err := tp.hs.nl.LinkByName("g0")
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyOf(tp.hs.h)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := openSpace(tp.hs.h, key)
	if err != nil {
		t.Fatal(err)
	}
	err = sp.setXDP(g0.Attrs().Index, foreign.FD(), nl.XDP_FLAGS_DRV_MODE)
	sp.close()
	if err != nil {
		t.Fatal(err)
	}

	err = s.Attach(tp.hs.h, "g0", tp.guests[0].h, "eth0")
	if err == nil || !strings.Contains(err.Error(), "another XDP program") {
		t.Fatalf("Attach over a foreign program: %v", err)
	}
	eth0, err := tp.guests[0].nl.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if x := eth0.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("the far end kept XDP program %d", x.ProgId)
	}
	if len(s.spaces) != 0 || len(s.ifaces) != 0 {
		t.Errorf("the Set kept %d namespaces and %d interfaces", len(s.spaces), len(s.ifaces))
	}
	gsp, err := openSpace(tp.guests[0].h, nsKey{})
	if err != nil {
		t.Fatal(err)
	}
	defer gsp.close()
	if o := (&iface{sp: gsp, name: "eth0"}).readOffloads(); !o["tx-checksumming"] {
		t.Errorf("the far end's offloads were not restored: %v", o)
	}
	if d := s.Describe(); len(d) != 3 {
		t.Errorf("Describe after a failed Attach: %v", d)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestCloseRestoresOffloads checks the far end's TX checksumming is back
// on after an xdp Set closes, while the namespaces still exist.
func TestCloseRestoresOffloads(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	tp := newTopology(t, 1)
	s, err := Load(XDP)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Attach(tp.hs.h, "g0", tp.guests[0].h, "eth0"); err != nil {
		t.Fatal(err)
	}
	txCsum := func() bool {
		key, err := keyOf(tp.guests[0].h)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := openSpace(tp.guests[0].h, key)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.close()
		o := (&iface{sp: sp, name: "eth0"}).readOffloads()
		if o == nil {
			t.Fatal("eth0 reports no offloads")
		}
		return o["tx-checksumming"]
	}
	if txCsum() {
		t.Fatal("tx-checksumming is on while attached")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !txCsum() {
		t.Fatal("tx-checksumming is still off after Close")
	}
	g0, err := tp.hs.nl.LinkByName("g0")
	if err != nil {
		t.Fatal(err)
	}
	if x := g0.Attrs().Xdp; x != nil && x.Attached {
		t.Fatalf("g0 still has XDP program %d after Close", x.ProgId)
	}
}

func mustForwarded(t *testing.T, ns *testNS) uint64 {
	t.Helper()
	n, err := ns.forwarded()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustCounters(t *testing.T, s *Set) Counters {
	t.Helper()
	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAttachTapHooksTheTap attaches each fast path to a VM's tap beside
// its uplink: the program on the tap as on a veth's host end (xdp in
// driver mode), the tap in the xdp device map, which the uplink's program
// redirects through, but not in tc's map of veths, whose redirect needs a
// peer; a tap is not taken for a veth or the other way round; Close takes
// it all off. (The traffic is netpath's conformance test's.)
func TestAttachTapHooksTheTap(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			t.Cleanup(func() { testutil.CheckLeaks(t, before) })
			tp := newTopology(t, 1)
			tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "vm0"}, Mode: netlink.TUNTAP_MODE_TAP,
				Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR | netlink.TUNTAP_ONE_QUEUE}
			// A tap is made through /dev/net/tun in the caller's namespace,
			// whatever netlink handle asks.
			if err := nsthread.Do(tp.hs.h, func() error { return netlink.LinkAdd(tap) }); err != nil {
				t.Fatal(err)
			}
			for _, f := range tap.Fds {
				f.Close() // persistent: it stays until its namespace goes
			}
			s, err := Load(mode)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Attach(tp.hs.h, "up0", tp.peer.h, "eth0"); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second time changes nothing
				if err := s.AttachTap(tp.hs.h, "vm0"); err != nil {
					t.Fatal(err)
				}
			}
			for what, err := range map[string]error{
				"the tap as a veth":       s.Attach(tp.hs.h, "vm0", tp.guests[0].h, "eth0"),
				"the uplink as a tap":     s.AttachTap(tp.hs.h, "up0"),
				"a veth not attached yet": s.AttachTap(tp.hs.h, "g0"),
			} {
				if err == nil {
					t.Errorf("attached %s", what)
				}
			}
			if len(s.ifaces) != 3 {
				t.Errorf("the Set holds %d interfaces, want the uplink's two ends and the tap", len(s.ifaces))
			}
			l, err := tp.hs.nl.LinkByName("vm0")
			if err != nil {
				t.Fatal(err)
			}
			index := uint32(l.Attrs().Index)
			var v uint32
			inMap := s.egress.Lookup(index, &v) == nil
			d := s.Describe()
			switch mode {
			case XDP:
				if x := l.Attrs().Xdp; x == nil || !x.Attached || x.AttachMode != nl.XDP_ATTACHED_DRV {
					t.Errorf("vm0 has XDP %+v, want our program in driver mode", x)
				}
				if !inMap {
					t.Error("vm0 is not in the device map: the uplink's program cannot redirect to it")
				}
			case TC:
				filters, err := tp.hs.nl.FilterList(l, netlink.HANDLE_MIN_INGRESS)
				if err != nil || len(filters) != 1 {
					t.Errorf("vm0 has ingress filters %v (%v), want ours", filters, err)
				}
				if inMap {
					t.Error("vm0 is in the map of veths: tc would bpf_redirect_peer into a tap")
				}
			}
			if !strings.HasPrefix(d["if.vm0"], map[Mode]string{XDP: hookXDPDriver, TC: hookTCIngress}[mode]) || !strings.HasPrefix(d["if.vm0.far"], "none: a tap") {
				t.Errorf("Describe says of the tap %q, far end %q", d["if.vm0"], d["if.vm0.far"])
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = tp.hs.nl.LinkByName("vm0"); err != nil {
				t.Fatal(err)
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				t.Errorf("vm0 still has XDP program %d after Close", x.ProgId)
			}
			if filters, err := tp.hs.nl.FilterList(l, netlink.HANDLE_MIN_INGRESS); err == nil && len(filters) != 0 {
				t.Errorf("vm0 still has ingress filters %v after Close", filters)
			}
		})
	}
}

// TestAttachNICWithoutNativeXDP attaches xdp to a NIC whose driver has no
// XDP of its own (a bridge, which every kernel here has): generic mode, recorded, and the NIC kept out
// of the device map, since a frame redirected to it would be dropped
// unseen; Close takes the generic program off.
func TestAttachNICWithoutNativeXDP(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	tp := newTopology(t, 1)
	if err := tp.hs.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "lab0"}}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(XDP)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 { // the second time changes nothing
		if err := s.AttachNIC(tp.hs.h, "lab0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AttachTap(tp.hs.h, "lab0"); err == nil {
		t.Error("attached the NIC as a tap")
	}
	l, err := tp.hs.nl.LinkByName("lab0")
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x == nil || !x.Attached || x.AttachMode != nl.XDP_ATTACHED_SKB {
		t.Errorf("lab0 has XDP %+v, want our program in generic mode", x)
	}
	var v uint32
	if s.egress.Lookup(uint32(l.Attrs().Index), &v) == nil {
		t.Error("lab0 is in the device map: the guests' programs would redirect frames its driver cannot send")
	}
	if d := s.Describe(); !strings.HasPrefix(d["if.lab0"], hookXDPGeneric) || !strings.HasPrefix(d["if.lab0.sent_by"], "the stack") {
		t.Errorf("Describe says of the NIC %q, sent by %q", d["if.lab0"], d["if.lab0.sent_by"])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = tp.hs.nl.LinkByName("lab0"); err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("lab0 still has XDP program %d after Close", x.ProgId)
	}
}
