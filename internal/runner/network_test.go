package runner

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// fakeNetRun is a run of one fake guest, c, beside a fake network peer:
// what a network step does, without a network.
func fakeNetRun(t *testing.T) (*run, guest.Guest) {
	t.Helper()
	reset(t)
	g, err := fake.New(guest.Spec{Name: "c", Kind: "fake"}, guest.Env{})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := fake.New(guest.Spec{Name: scenario.PeerName, Kind: "fake"}, guest.Env{})
	if err != nil {
		t.Fatal(err)
	}
	n := &netRun{cfg: &scenario.Network{ClientCPU: scenario.NoPin, ServerCPU: scenario.NoPin}, peer: peer,
		views: map[string]netView{"c": {peer: workload.Peer{Addr: netip.MustParseAddr("198.18.0.1"), Port: firstServerPort},
			addr: netip.MustParseAddr("198.18.0.2")}},
		servers: map[string]*server{}, serverLife: time.Minute}
	t.Cleanup(func() { n.close(context.Background()) })
	return &run{net: n, records: map[string]store.GuestRecord{"c": {Group: "c"}}}, g
}

// netCommandStep is a step of a net-command with the given parameters
// beside its defaults.
func netCommandStep(t *testing.T, params workload.Params) (workload.Networked, scenario.Step) {
	t.Helper()
	w, err := workload.Lookup("net-command")
	if err != nil {
		t.Fatal(err)
	}
	p := w.Defaults()
	p["argv"], p["metrics"] = `["mybench","{peer}"]`, `[{"name":"rtt","unit":"us","better":"lower","regex":"rtt (\\d+)"}]`
	for k, v := range params {
		p[k] = v
	}
	if err := w.Validate(p); err != nil {
		t.Fatal(err)
	}
	return w.(workload.Networked), scenario.Step{Guest: "c", WorkloadID: "nc", Workload: "net-command", Params: p, Duration: time.Second}
}

// A net-command's server program missing on the side that would run it
// fails the step by name and place before anything runs, on the peer as
// in the guest.
func TestNetCommandProgramsAreFoundBeforeTheStepRuns(t *testing.T) {
	for _, tc := range []struct {
		client, want string
	}{
		{workload.ClientGuest, "missing tool: nosuchd is not in vfleet's image on the network peer"},
		{workload.ClientPeer, "missing tool: nosuchd is not in vfleet's image"},
	} {
		r, g := fakeNetRun(t)
		fake.Lacks("nosuchd")
		var execs atomic.Int32
		fake.OnExec(func(string) { execs.Add(1) })
		w, st := netCommandStep(t, workload.Params{"server": `["nosuchd","-p","{port}"]`, workload.ParamClient: tc.client})
		_, _, err := r.exec(context.Background(), g, w, st, 0, 1)
		if !errors.Is(err, ErrToolMissing) || err.Error() != tc.want {
			t.Errorf("client %s: err = %v, want %q", tc.client, err, tc.want)
		}
		if n := execs.Load(); n != 0 {
			t.Errorf("client %s: %d executions before the missing program was found", tc.client, n)
		}
	}
}

// A program that a workload's own program runs in its turn (the encoder
// vfleet-encode times) is found before the step runs, as the first is:
// an image without it would fail the step as the wrapper's exit status.
func TestProgramsAWrapperRunsAreFoundBeforeTheStepRuns(t *testing.T) {
	r, g := fakeNetRun(t)
	fake.Lacks("lame")
	var execs atomic.Int32
	fake.OnExec(func(string) { execs.Add(1) })
	w, err := workload.Lookup("lame")
	if err != nil {
		t.Fatal(err)
	}
	st := scenario.Step{Guest: "c", WorkloadID: "lame", Workload: "lame", Params: w.Defaults(), Duration: time.Second}
	_, _, err = r.exec(context.Background(), g, w, st, 0, 1)
	if want := "missing tool: lame is not in vfleet's image"; !errors.Is(err, ErrToolMissing) || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if n := execs.Load(); n != 0 {
		t.Errorf("%d executions before the missing program was found", n)
	}
}

// A built-in network workload's server is found on the peer too: a peer
// without it would fail as a server that never listens.
func TestBuiltinNetworkServerIsFoundOnThePeer(t *testing.T) {
	r, g := fakeNetRun(t)
	bare := guesttest.NewFake("bare-peer", func(guest.Spec) guest.Info { return guest.Info{} })
	bare.Reset(nil)
	bare.Lacks("sockperf")
	peer, err := bare.New(guest.Spec{Name: scenario.PeerName}, guest.Env{})
	if err != nil {
		t.Fatal(err)
	}
	r.net.peer = peer
	w, err := workload.Lookup("net-latency")
	if err != nil {
		t.Fatal(err)
	}
	st := scenario.Step{Guest: "c", WorkloadID: "rr", Workload: "net-latency", Params: w.Defaults(), Duration: time.Second}
	_, _, err = r.exec(context.Background(), g, w.(workload.Networked), st, 0, 1)
	if want := "missing tool: sockperf is not in vfleet's image on the network peer"; !errors.Is(err, ErrToolMissing) || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// Where guests share CPUs, a network step's time limits stretch as any
// step's do, the measured client's and those on the server's side.
func TestNetworkStepTimeoutsStretchForSharedCPUs(t *testing.T) {
	r, g := fakeNetRun(t)
	w, st := netCommandStep(t, workload.Params{"pre": `["true"]`})
	if _, _, err := r.exec(context.Background(), g, w, st, 0, 3); err != nil {
		t.Fatal(err)
	}
	ne, err := w.NetCommand(st.Params, st.Duration, r.net.views["c"].peer)
	if err != nil {
		t.Fatal(err)
	}
	got := fake.Timeouts()
	if got["c"] != 3*ne.Timeout || got[scenario.PeerName] != 3*ne.ServerPre[0].Timeout {
		t.Errorf("time limits: client %s, pre %s; want 3 times %s and %s", got["c"], got[scenario.PeerName], ne.Timeout, ne.ServerPre[0].Timeout)
	}
}

// A guest starts joined to the network of its phase and where the run
// placed it; with no network it joins none.
func TestGuestStartsAsPlacedAndJoinedLeavingThePlan(t *testing.T) {
	pg := scenario.PlannedGuest{Group: "vm", Network: "bridge", Spec: guest.Spec{Name: "vm", Kind: "fake", VCPUs: 2}}
	tap := &guest.TapConfig{Name: "tap0", MAC: "02:00:00:00:00:01"}
	r := &run{placed: placement{pins: map[string]guestPin{"vm": {vcpus: "2-3"}}},
		net: &netRun{joins: map[string]join{"vm": {tap: tap}, "c": {netNS: "/run/netns/c"}}}}
	got := r.startSpec(pg)
	want := pg.Spec
	want.PinVCPUs, want.Tap = "2-3", tap
	if !reflect.DeepEqual(got, want) {
		t.Errorf("start spec %+v, want %+v", got, want)
	}
	r.net = nil
	if got := r.startSpec(pg); got.Tap != nil || got.NetNS != "" {
		t.Errorf("with no network, start spec %+v joins one", got)
	}
}

// ownNetKind's guests are on a network of their own, as pods are: each
// has an address there, and the peer its kind names serves them, one per
// "cluster".
type ownNetKind struct{ *guesttest.Fake }

func (ownNetKind) Traits() guest.Traits { return guest.Traits{Network: guest.NetOwn} }

func (ownNetKind) NetPeer(spec guest.Spec) (string, guest.Spec) {
	return spec.Own.Text("cluster"), guest.Spec{Kind: "ownnet-fake", Own: spec.Own}
}

var ownNetAddrs = map[string]string{"peer-ownnet-fake-1": "198.19.1.2", "peer-ownnet-fake-2": "198.19.2.2", "a-0": "198.19.1.10", "b-0": "198.19.2.10"}

var ownNetFake = ownNetKind{guesttest.NewFake("ownnet-fake", func(s guest.Spec) guest.Info {
	a, _ := netip.ParseAddr(ownNetAddrs[s.Name])
	return guest.Info{Kind: "ownnet-fake", Addr: a}
})}

func init() { guest.Register(ownNetFake) }

// Guests on networks of their own reach a run's network workloads
// through their kind's peer there, one per network, started with the
// run's own peer; each one's view is made as it starts, from the
// addresses on its network, and a guest without one is refused.
func TestGuestsOnTheirOwnNetworkUseTheirKindsPeer(t *testing.T) {
	spec := func(name, cluster string) guest.Spec {
		return guest.Spec{Name: name, Kind: "ownnet-fake", Own: guest.Own{}.With("cluster", cluster)}
	}
	local, _ := fake.New(guest.Spec{Name: scenario.PeerName, Kind: "fake"}, guest.Env{})
	n := &netRun{peer: local, views: map[string]netView{}, own: map[string]*ownPeer{}, ownOf: map[string]string{}, ports: map[string]int{}}
	for i, s := range []guest.Spec{spec("a-0", "one"), spec("a-1", "one"), spec("b-0", "two")} {
		if err := n.ownNetwork(s, firstServerPort+i*workload.PortsPerGuest); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.own) != 2 || n.own["one"].spec.Name != "peer-ownnet-fake-1" || n.own["two"].spec.Name != "peer-ownnet-fake-2" {
		t.Fatalf("peers %+v, want one per network, named apart from the run's", n.own)
	}
	led, err := ledger.Create(t.TempDir(), "run")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	env := guest.Env{Ledger: led}
	if err := n.startOwnPeers(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	defer n.close(context.Background())
	start := func(s guest.Spec) guest.Guest {
		g, err := startGuest(context.Background(), s, env)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	b := start(spec("b-0", "two"))
	if err := n.joined("b-0", b); err != nil {
		t.Fatal(err)
	}
	e := n.endsOf(b, workload.Params{})
	if e.server != n.own["two"].g || e.target != (workload.Peer{Addr: netip.MustParseAddr("198.19.2.2"), Port: firstServerPort + 2*workload.PortsPerGuest}) {
		t.Errorf("b-0's step: server %s at %v, want its network's peer at 198.19.2.2, its own ports", e.server.Spec().Name, e.target)
	}
	if e := n.endsOf(b, workload.Params{workload.ParamClient: workload.ClientPeer}); e.client != n.own["two"].g || e.target.Addr != netip.MustParseAddr("198.19.2.10") {
		t.Errorf("client: peer: client %s to %v, want the peer to b-0's own address", e.client.Spec().Name, e.target)
	}
	if !n.isPeer(n.own["one"].g) || n.isPeer(b) || n.peerOf("host") != local {
		t.Error("the run's peers are not told from its guests")
	}
	// a-1 has no address on its network.
	if err := n.joined("a-1", start(spec("a-1", "one"))); err == nil {
		t.Error("a guest without an address on its network was taken")
	}
	if _, ok := n.views["a-1"]; ok {
		t.Error("a guest without an address has a view")
	}
	if err := n.ownNetwork(guest.Spec{Name: "x", Kind: "fake"}, firstServerPort); err == nil {
		t.Error("a kind with no peer of its own was taken on a network of its own")
	}
	if recs := n.ownRecords(); len(recs) != 2 || recs["peer-ownnet-fake-1"].Group != scenario.PeerName {
		t.Errorf("records %+v, want each peer's, in the peer group", recs)
	}
}
