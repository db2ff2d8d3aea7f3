package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/procfs"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// serverReadyTimeout bounds the wait for a peer server to listen: a
// server that exits is seen at once, so this only bounds one that hangs.
// A guest under TCG on a busy host is slow to start one: 15 s, enough
// alone, ran out for one of eight emulated VMs of a run beside other
// tests' guests on two busy cores.
const serverReadyTimeout = time.Minute

// firstServerPort is where the guests' port ranges on the peer begin:
// above the well-known and registered ports a tool might assume.
const firstServerPort = 20000

// netRun is the network side of a run: the topology, the peer that runs
// the servers, and each guest's view of the peer.
type netRun struct {
	cfg  *scenario.Network
	net  *netpath.Network
	peer guest.Guest
	// remote is the peer when it is another machine's, nil for the local
	// one.
	remote *remotePeer
	views  map[string]netView // by guest name
	// joins is how each guest attached to this network joins it, by
	// name: the plan is the caller's, so it joins a guest's spec only as
	// the guest starts (on). A phase that owns its network has its own.
	joins map[string]join
	// serverLife bounds every server process: servers idle between steps,
	// yet no process vfleet starts may run unbounded.
	serverLife time.Duration
	// own are the peers of kinds on networks of their own (a cluster's
	// pods, guest.NetPeered), by their key; ownOf is the key of each
	// such guest's, and ports its first server port. Its view is made
	// as it starts (joined), when its address is known.
	own   map[string]*ownPeer
	ownOf map[string]string
	ports map[string]int

	mu      sync.Mutex
	servers map[string]*server // by guest name + "/" + server name
	wg      sync.WaitGroup
}

// netView is how one guest and the peer reach each other.
type netView struct {
	path netpath.Path
	peer workload.Peer
	// addr is the guest's own address as the peer reaches it, where the
	// peer's clients connect when the guest serves.
	addr netip.Addr
	// hostSide is the host side's address on the guest's way to the peer.
	hostSide netip.Addr
}

// join is how a guest joins the network: the namespace it enters, or
// the tap that is its NIC.
type join struct {
	netNS string
	tap   *guest.TapConfig
}

// on is spec joined to the network, if the guest was attached to it.
func (n *netRun) on(spec guest.Spec) guest.Spec {
	if j, ok := n.joins[spec.Name]; ok {
		spec.NetNS, spec.Tap = j.netNS, j.tap
	}
	return spec
}

// ownPeer is the peer of guests on a network of their own.
type ownPeer struct {
	spec guest.Spec
	g    guest.Guest
}

// ownPath is the path a guest on a network of its own reaches its peer
// by, as samples and records name it.
const ownPath netpath.Path = "own"

type server struct {
	done   chan struct{}
	reply  agent.Reply
	err    error
	cancel context.CancelFunc
}

// newNetRun builds the network, attaches the guests of the run's plan
// that only names, or every one when nil (noting the namespace or tap
// each joins, see on), and starts the peer: a local one, or the remote one
// across the dedicated NIC, which is reached and checked before anything
// is made. On error, what was made is left for close.
func newNetRun(ctx context.Context, plan *scenario.Plan, only []string, env guest.Env, key string, agentFor func(string) (string, error)) (_ *netRun, err error) {
	attached := func(pg scenario.PlannedGuest) bool { return only == nil || slices.Contains(only, pg.Spec.Name) }
	var paths []netpath.Path
	for _, pg := range plan.Guests {
		if pg.Network != "" && attached(pg) && !slices.Contains(paths, netpath.Path(pg.Network)) {
			paths = append(paths, netpath.Path(pg.Network))
		}
	}
	n := &netRun{cfg: plan.Spec.Network, views: map[string]netView{}, joins: map[string]join{}, servers: map[string]*server{},
		serverLife: serverLifetime(plan), own: map[string]*ownPeer{}, ownOf: map[string]string{}, ports: map[string]int{}}
	var m *remote.Machine
	var found []remote.Found
	handedOver := false
	if n.cfg.Peer != "" {
		if env.Detached {
			return n, ErrDetachedPeer
		}
		if m, found, err = dialPeer(ctx, plan.Spec, paths); err != nil {
			return n, err
		}
		// The connection is this function's to close on error until
		// startRemotePeer takes it (and closes it on its own error).
		defer func() {
			if err != nil && !handedOver {
				err = errors.Join(err, m.Close(context.WithoutCancel(ctx)))
			}
		}()
	}
	if n.net, err = netpath.Create(ctx, netpath.Options{RunKey: key, Ledger: env.Ledger, Paths: paths, StateDir: env.StateDir, Detached: env.Detached,
		Uplink: n.cfg.Uplink, Passthrough: n.cfg.Passthrough}); err != nil {
		return n, err
	}
	// The bare baseline is the floor: the host's own link to the peer,
	// which for a remote peer is the dedicated NIC itself, with no guest
	// in between (netpath makes no direct link then), under the network's
	// one guest path (netpath.Create).
	floor := netpath.UplinkOf(netpath.Direct)
	if m != nil {
		floor = netpath.UplinkOf(paths[0])
	}
	for i, pg := range plan.Guests {
		if !attached(pg) {
			continue
		}
		if guest.TraitsOf(pg.Spec).Network == guest.NetOwn {
			if err := n.ownNetwork(pg.Spec, firstServerPort+i*workload.PortsPerGuest); err != nil {
				return n, err
			}
			continue
		}
		view := netView{path: netpath.Direct, peer: workload.Peer{Addr: floor.Peer.Addr(), Port: firstServerPort + i*workload.PortsPerGuest},
			addr: floor.Host.Addr(), hostSide: floor.Host.Addr()}
		switch {
		case pg.Network == "":
			n.joins[pg.Spec.Name] = join{netNS: n.net.HostSide()}
		case guest.TraitsOf(pg.Spec).Network == guest.NetTap && tapsInRoot(pg.Spec):
			link, tap, err := n.net.AttachRootTap(pg.Spec.Name, netpath.Path(pg.Network))
			if err != nil {
				return n, err
			}
			n.joins[pg.Spec.Name] = join{tap: &guest.TapConfig{Name: tap, Addr: link.Addr, Gateway: link.Gateway, MAC: link.MAC.String(), OffloadsOff: link.OffloadsOff, Root: true}}
			view.path, view.peer.Addr, view.addr = link.Path, link.Peer, link.Addr.Addr()
		case guest.TraitsOf(pg.Spec).Network == guest.NetTap:
			link, err := n.net.AttachTap(pg.Spec.Name, netpath.Path(pg.Network))
			if err != nil {
				return n, err
			}
			n.joins[pg.Spec.Name] = join{tap: &guest.TapConfig{NSPath: n.net.HostSide(), Name: link.HostIf, Addr: link.Addr, Gateway: link.Gateway, MAC: link.MAC.String(), OffloadsOff: link.OffloadsOff}}
			view.path, view.peer.Addr, view.addr, view.hostSide = link.Path, link.Peer, link.Addr.Addr(), netpath.UplinkOf(link.Path).Host.Addr()
		default:
			link, nsPath, err := n.net.Attach(pg.Spec.Name, netpath.Path(pg.Network))
			if err != nil {
				return n, err
			}
			n.joins[pg.Spec.Name] = join{netNS: nsPath}
			view.path, view.peer.Addr, view.addr, view.hostSide = link.Path, link.Peer, link.Addr.Addr(), netpath.UplinkOf(link.Path).Host.Addr()
		}
		n.views[pg.Spec.Name] = view
	}
	if m != nil {
		handedOver = true
		if n.remote, err = startRemotePeer(ctx, m, found, n.cfg, paths[0], env, agentFor); err != nil {
			return n, err
		}
		n.peer = n.remote
		return n, n.startOwnPeers(ctx, env)
	}
	n.peer, err = startGuest(ctx, guest.Spec{Name: scenario.PeerName, Kind: scenario.BaselineKind, NetNS: n.net.PeerNS()}, env)
	if err != nil {
		return n, fmt.Errorf("start the network peer: %w", err)
	}
	return n, n.startOwnPeers(ctx, env)
}

// ownNetwork notes a guest on a network of its own, and the peer there
// that serves it.
func (n *netRun) ownNetwork(spec guest.Spec, port int) error {
	key, peer, ok := guest.NetPeerOf(spec)
	if !ok {
		return fmt.Errorf("guest %s: kind %s is on a network of its own, which no peer of the run reaches", spec.Name, spec.Kind)
	}
	if n.own[key] == nil {
		peer.Name = fmt.Sprintf("%s-%s-%d", scenario.PeerName, spec.Kind, len(n.own)+1)
		n.own[key] = &ownPeer{spec: peer}
	}
	n.ownOf[spec.Name], n.ports[spec.Name] = key, port
	return nil
}

// startOwnPeers starts the peers on the guests' own networks.
func (n *netRun) startOwnPeers(ctx context.Context, env guest.Env) error {
	for _, key := range slices.Sorted(maps.Keys(n.own)) {
		op := n.own[key]
		g, err := startGuest(ctx, op.spec, env)
		if err != nil {
			return fmt.Errorf("start the network peer %s: %w", op.spec.Name, err)
		}
		op.g = g
	}
	return nil
}

// joined makes the view of a guest on a network of its own once it has
// started, from its address there and its peer's; nothing for another.
// The run calls it for one guest at a time.
func (n *netRun) joined(name string, g guest.Guest) error {
	key, ok := n.ownOf[name]
	if !ok {
		return nil
	}
	peer := n.own[key].g
	addr, peerAddr := g.Info().Addr, peer.Info().Addr
	if !addr.IsValid() || !peerAddr.IsValid() {
		return fmt.Errorf("guest %s: no address on its own network (%v), or none of its peer %s (%v)", name, addr, peer.Spec().Name, peerAddr)
	}
	n.views[name] = netView{path: ownPath, peer: workload.Peer{Addr: peerAddr, Port: n.ports[name]}, addr: addr}
	return nil
}

// peerOf is the peer that serves a guest.
func (n *netRun) peerOf(name string) guest.Guest {
	if key, ok := n.ownOf[name]; ok {
		return n.own[key].g
	}
	return n.peer
}

// isPeer says whether g is one of the run's peers.
func (n *netRun) isPeer(g guest.Guest) bool {
	return g == n.peer || slices.ContainsFunc(slices.Collect(maps.Values(n.own)), func(op *ownPeer) bool { return op.g == g })
}

// ownRecords are the stored records of the peers on the guests' own
// networks, by name.
func (n *netRun) ownRecords() map[string]store.GuestRecord {
	out := map[string]store.GuestRecord{}
	for _, op := range n.own {
		if op.g == nil {
			continue
		}
		info := op.g.Info()
		out[op.spec.Name] = store.GuestRecord{Group: scenario.PeerName, Kind: info.Kind, BootNS: info.BootTime.Nanoseconds(), Details: info.Details}
	}
	return out
}

// serverLifetime is an upper bound on how long the run's steps can take.
func serverLifetime(plan *scenario.Plan) time.Duration {
	total := 10 * time.Minute
	for _, st := range plan.Steps {
		total += 2*st.Duration + 30*time.Second
	}
	return total
}

// record is the peer's stored record: the network's whole description.
func (n *netRun) record() store.GuestRecord {
	rec := store.GuestRecord{Group: scenario.PeerName, Kind: scenario.BaselineKind}
	if n.net != nil {
		rec.Details = n.net.Describe()
	}
	if n.remote != nil {
		rec.Kind = KindRemotePeer
		rec.Details = mergeDetails(rec.Details, n.remote.details())
	}
	if n.peer != nil {
		rec.BootNS = n.peer.Info().BootTime.Nanoseconds()
	}
	return rec
}

// guestDetails describes a guest's link for its stored record.
func (n *netRun) guestDetails(name string) map[string]string {
	v, ok := n.views[name]
	if !ok {
		return nil
	}
	return map[string]string{"net.path": string(v.path), "net.peer": v.peer.Addr.String(), "net.ports": fmt.Sprintf("%d-%d", v.peer.Port, v.peer.Port+workload.PortsPerGuest-1)}
}

// placement is stored with every sample of a network workload.
func (n *netRun) placement(guestName string) map[string]string {
	return map[string]string{"path": string(n.views[guestName].path), "client_cpu": cpuLabel(n.cfg.ClientCPU), "server_cpu": cpuLabel(n.cfg.ServerCPU)}
}

// ends are who runs a step's client and servers, and where the client
// connects: by default the guest is the client and the peer serves it.
type ends struct {
	client, server guest.Guest
	// role names the server's side in its processes' keys.
	role   string
	target workload.Peer
}

func (n *netRun) endsOf(g guest.Guest, p workload.Params) ends {
	name := g.Spec().Name
	v, peer := n.views[name], n.peerOf(name)
	if workload.ClientOf(p) == workload.ClientPeer {
		return ends{client: peer, server: g, role: "guest", target: workload.Peer{Addr: v.addr, Port: v.peer.Port}}
	}
	return ends{client: g, server: peer, role: "peer", target: v.peer}
}

// listen is where a step's servers listen. A remote peer is a machine
// with networks of its own, so its servers listen on the address the
// client reaches alone; the local peer is a namespace of the run's whose
// every address is on the run's networks, and a serving guest listens on
// all of its own as before.
func (n *netRun) listen(e ends) workload.Listen {
	return workload.Listen{Addr: e.target.Addr, Port: e.target.Port, Only: n.remote != nil && e.server == n.peer}
}

func cpuLabel(cpu int) string {
	if cpu == scenario.NoPin {
		return "any"
	}
	return strconv.Itoa(cpu)
}

// pinned prefixes argv with taskset when the scenario pins that side.
func pinned(cpu int, argv []string) []string {
	if cpu == scenario.NoPin {
		return argv
	}
	return append([]string{"taskset", "--cpu-list", strconv.Itoa(cpu)}, argv...)
}

// ensureServers starts the servers a step needs on its server side, once
// per guest, side and server, and waits until each listens.
func (n *netRun) ensureServers(ctx context.Context, guestName string, e ends, w workload.Networked, p workload.Params) error {
	for _, s := range w.Servers(p, n.listen(e)) {
		key := guestName + "/" + e.role + "/" + s.Name
		n.mu.Lock()
		srv, running := n.servers[key]
		n.mu.Unlock()
		if running {
			select {
			case <-srv.done:
				return fmt.Errorf("%s server %s for %s stopped earlier: %w", e.role, s.Name, guestName, serverError(srv))
			default:
				continue
			}
		}
		srv = n.startServer(e.server, s)
		n.mu.Lock()
		n.servers[key] = srv
		n.mu.Unlock()
		if err := n.waitListening(ctx, e.server, s, srv); err != nil {
			return fmt.Errorf("%s server %s for %s: %w", e.role, s.Name, guestName, err)
		}
	}
	return nil
}

// startServer runs a server on the side g until the run closes; the
// request lasts as long as the server does, beside the other work on the
// same agent connection.
func (n *netRun) startServer(g guest.Guest, s workload.Server) *server {
	sctx, cancel := context.WithCancel(context.Background())
	srv := &server{done: make(chan struct{}), cancel: cancel}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer close(srv.done)
		srv.reply, srv.err = g.Exec(sctx, agent.Request{Argv: pinned(n.cfg.ServerCPU, s.Argv), TimeoutMS: n.serverLife.Milliseconds()})
	}()
	return srv
}

func serverError(s *server) error {
	if s.err != nil {
		return s.err
	}
	return execError(s.reply)
}

func (n *netRun) waitListening(ctx context.Context, g guest.Guest, s workload.Server, srv *server) error {
	tables := []string{"/proc/net/tcp", "/proc/net/tcp6"}
	if s.Proto == "udp" {
		tables = []string{"/proc/net/udp", "/proc/net/udp6"}
	}
	wctx, cancel := context.WithTimeout(ctx, serverReadyTimeout)
	defer cancel()
	for {
		reply, err := g.Exec(wctx, agent.Request{Argv: append([]string{"cat"}, tables...), TimeoutMS: 5000})
		if err == nil && reply.Succeeded() {
			up, perr := procfs.Listening(reply.Stdout, s.Proto, s.Port)
			if perr != nil {
				return perr
			}
			if up {
				return nil
			}
		}
		select {
		case <-srv.done:
			return fmt.Errorf("exited before listening: %w", serverError(srv))
		case <-wctx.Done():
			return fmt.Errorf("not listening on %s port %d after %s", s.Proto, s.Port, serverReadyTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exec runs one measured network step: background load first, then the
// measured client, on the side the step names, pinned as the scenario
// says, with the host's CPU time sampled around it. A client on the peer
// starts when asked: startAt is on the guest's clock. stretch (at least
// 1) multiplies the step's time limits, as for any other step.
func (n *netRun) exec(ctx context.Context, g guest.Guest, w workload.Networked, st scenario.Step, startAt int64, stretch float64) (agent.Reply, cpuUse, error) {
	e := n.endsOf(g, st.Params)
	if err := n.ensureServers(ctx, g.Spec().Name, e, w, st.Params); err != nil {
		return agent.Reply{}, cpuUse{}, err
	}
	ne, err := w.NetCommand(st.Params, st.Duration, e.target)
	if err != nil {
		return agent.Reply{}, cpuUse{}, err
	}
	// Both ends, and the peer, share the host's CPUs with the guests.
	ne.Timeout = stretched(ne.Timeout, stretch)
	for _, execs := range [][]workload.Exec{ne.Background, ne.ServerPre, ne.ServerPost} {
		for i := range execs {
			execs[i].Timeout = stretched(execs[i].Timeout, stretch)
		}
	}
	if e.client != g {
		startAt = 0
	}
	if err := n.runOnServer(ctx, e, "pre", ne.ServerPre); err != nil {
		return agent.Reply{}, cpuUse{}, err
	}
	reply, use, err := n.measure(ctx, g, e, ne, startAt)
	return reply, use, errors.Join(err, n.runOnServer(context.WithoutCancel(ctx), e, "post", ne.ServerPost))
}

// runOnServer runs a step's commands on its server side, one after the
// other; the first that fails ends them.
func (n *netRun) runOnServer(ctx context.Context, e ends, what string, execs []workload.Exec) error {
	for _, x := range execs {
		reply, err := e.server.Exec(ctx, agent.Request{Argv: x.Argv, TimeoutMS: x.Timeout.Milliseconds(), Dir: e.server.Info().ScratchDir})
		if err == nil && !reply.Succeeded() {
			err = execError(reply)
		}
		if err != nil {
			return fmt.Errorf("%s command %v on the %s: %w", what, x.Argv[0], e.role, err)
		}
	}
	return nil
}

// measure runs the measured client with its background load.
func (n *netRun) measure(ctx context.Context, g guest.Guest, e ends, ne workload.NetExec, startAt int64) (agent.Reply, cpuUse, error) {
	// The background load ends by itself shortly after the measured
	// client; it is stopped with it if the step fails.
	bctx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	bgErrs := make(chan error, len(ne.Background))
	var bg sync.WaitGroup
	for _, b := range ne.Background {
		bg.Add(1)
		go func() {
			defer bg.Done()
			reply, err := e.client.Exec(bctx, agent.Request{Argv: b.Argv, TimeoutMS: b.Timeout.Milliseconds(), Dir: e.client.Info().ScratchDir})
			if err == nil && !reply.Succeeded() {
				err = execError(reply)
			}
			if err != nil {
				bgErrs <- fmt.Errorf("background load %v: %w", b.Argv[0], err)
			}
		}()
	}
	pids := g.Info().PIDs
	ownKernel := guest.TraitsOf(g.Spec()).OwnKernel
	var inBefore cpuTimes
	var inErr error
	if ownKernel {
		inBefore, inErr = readGuestCPU(ctx, g)
	}
	// This host's counters say nothing of a guest that runs elsewhere (a
	// pod, on its node): no cost samples for it.
	hostCPU := readCPU
	if guest.TraitsOf(g.Spec()).Elsewhere {
		hostCPU = func() (cpuTimes, error) { return cpuTimes{}, errElsewhere }
	}
	before, cerr := hostCPU()
	before.guestUser = guestUserTicks(pids)
	reply, err := e.client.Exec(ctx, agent.Request{Argv: pinned(n.cfg.ClientCPU, ne.Argv), Dir: e.client.Info().ScratchDir,
		TimeoutMS: ne.Timeout.Milliseconds(), MaxOutput: ne.MaxOutput, StartAtUnixNS: startAt})
	after, cerr2 := hostCPU()
	after.guestUser = guestUserTicks(pids)
	var inUse *float64
	if ownKernel && inErr == nil && err == nil {
		if inAfter, err := readGuestCPU(ctx, g); err == nil {
			inUse = inAfter.since(inBefore).cores()
		}
	}
	if err != nil {
		stopBackground()
	}
	bg.Wait()
	close(bgErrs)
	for e := range bgErrs {
		err = errors.Join(err, e)
	}
	use := cpuUse{}
	if cerr == nil && cerr2 == nil {
		use = after.since(before)
	}
	use.InGuest = inUse
	return reply, use, err
}

// errElsewhere is why a guest elsewhere has no host CPU counters.
var errElsewhere = errors.New("the guest runs on another machine")

// readGuestCPU reads the CPU counters of a guest's own kernel through its
// agent.
func readGuestCPU(ctx context.Context, g guest.Guest) (cpuTimes, error) {
	reply, err := g.Exec(ctx, agent.Request{Argv: []string{"cat", "/proc/stat"}, TimeoutMS: 5000})
	if err == nil && !reply.Succeeded() {
		err = execError(reply)
	}
	if err != nil {
		return cpuTimes{}, err
	}
	st, err := procfs.ParseCPUStat(reply.Stdout)
	return cpuTimes{CPUStat: st}, err
}

// cores is the busy share of an interval in CPUs, nil for an empty one.
func (u cpuUse) cores() *float64 {
	if u.TotalTicks == 0 || u.CPUs == 0 {
		return nil
	}
	c := float64(u.BusyTicks) / float64(u.TotalTicks) * float64(u.CPUs)
	return &c
}

// close stops the servers and the peer and deletes the network.
func (n *netRun) close(ctx context.Context) error {
	var errs []error
	n.mu.Lock()
	for _, s := range n.servers {
		s.cancel()
	}
	n.mu.Unlock()
	if n.peer != nil {
		if err := n.peer.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the network peer: %w", err))
		}
	}
	for _, op := range n.own {
		if op.g == nil {
			continue
		}
		if err := op.g.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the network peer %s: %w", op.spec.Name, err))
		}
	}
	n.wg.Wait()
	if n.net != nil {
		if err := n.net.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cpuTimes are the host's CPU counters from /proc/stat, with the user
// time of the measured guest's host processes, in clock ticks.
type cpuTimes struct {
	procfs.CPUStat
	guestUser uint64
}

func readCPU() (cpuTimes, error) {
	st, err := procfs.ReadCPUStat("/proc")
	return cpuTimes{CPUStat: st}, err
}

// cpuUse is the host's CPU consumption over an interval. KernelTicks and
// GuestUserTicks are parts of BusyTicks (see costSamples).
type cpuUse struct {
	BusyTicks, TotalTicks       uint64
	KernelTicks, GuestUserTicks uint64
	CPUs                        int
	// InGuest is the guest's own busy cores by its own /proc/stat, for a
	// guest with a kernel of its own; nil otherwise.
	InGuest *float64
}

func (a cpuTimes) since(b cpuTimes) cpuUse {
	u := cpuUse{BusyTicks: a.Busy - b.Busy, TotalTicks: a.Total - b.Total, KernelTicks: a.Kernel - b.Kernel, CPUs: a.CPUs}
	if a.guestUser >= b.guestUser {
		u.GuestUserTicks = a.guestUser - b.guestUser
	}
	return u
}

// guestUserTicks is the user time of a guest's host processes (a VM's
// emulator; a container's or the bare host's agent, with the tools it has
// waited for), whose threads and reaped children /proc/PID/stat sums.
func guestUserTicks(pids []int) uint64 {
	var ticks uint64
	for _, pid := range pids {
		if st, err := procfs.ReadStat(pid); err == nil {
			ticks += st.UTime + st.CUTime
		}
	}
	return ticks
}

// tapsInRoot says whether a VM's emulator opens its tap in this host's own
// namespace; the scenario refused those that cannot be on a path at all.
func tapsInRoot(spec guest.Spec) bool {
	root, err := guest.TapsInRoot(spec)
	return root && err == nil
}
