package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// ErrDetachedPeer refuses a long-lived fleet a remote peer: its agent
// lives as long as the SSH connection of the vfleet that started it.
var ErrDetachedPeer = errors.New("a long-lived fleet cannot have a remote peer")

// KindRemotePeer is the kind the stored record of a remote peer names.
const KindRemotePeer = "remote"

// remotePeer is the network peer on another machine: vfleet's agent there,
// reached over SSH, which runs the servers as the local peer's does. It is
// a guest.Guest so that the steps need not tell the two apart.
type remotePeer struct {
	m      *remote.Machine
	client *agent.Client
	boot   time.Duration
	// fp describes the peer's machine, its NIC and its programs.
	fp hostinfo.Fingerprint
}

// dialPeer reaches the scenario's remote peer and refuses it, before
// anything is made, when a program the scenario's network workloads run
// there is missing (naming its Debian package), when the dedicated NIC
// carries the SSH session to it, or when the peer's NIC is missing or
// has the address or routes of a path's wiring already. It returns the
// programs found.
func dialPeer(ctx context.Context, spec *scenario.Spec, paths []netpath.Path) (*remote.Machine, []remote.Found, error) {
	nw := spec.Network
	t, err := remote.ParseURL(nw.Peer)
	if err != nil {
		return nil, nil, err
	}
	m, err := remote.Dial(ctx, t, remote.Config{Identity: nw.PeerIdentity, KnownHosts: nw.PeerKnownHosts})
	if err != nil {
		return nil, nil, fmt.Errorf("network peer: %w", err)
	}
	found, err := m.CheckPrograms(ctx, peerPrograms(spec))
	if err == nil {
		err = netpath.CheckUplink(nw.Uplink, m.Addr())
	}
	for _, p := range paths {
		if err == nil {
			err = m.CheckWire(ctx, peerWiring(nw, p))
		}
	}
	if err != nil {
		m.Close(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("network peer %s: %w", t, err)
	}
	return m, found, nil
}

// CheckPeer is the refusals of a scenario's remote peer, for `run` to
// make before it builds or starts anything; nil without a remote peer.
func CheckPeer(ctx context.Context, spec *scenario.Spec) error {
	if spec.Network == nil || spec.Network.Peer == "" {
		return nil
	}
	var paths []netpath.Path
	for _, p := range spec.GuestPaths() {
		paths = append(paths, netpath.Path(p))
	}
	m, _, err := dialPeer(ctx, spec, paths)
	if err != nil {
		return err
	}
	return m.Close(ctx)
}

// peerPrograms are the programs of the scenario's network workloads, which
// the peer runs as servers (or clients), and those vfleet needs there to
// wire the NIC and to describe it.
func peerPrograms(spec *scenario.Spec) []programs.Program {
	progs := []programs.Program{remote.IP, remote.Ethtool}
	for _, e := range spec.Workloads {
		w, err := workload.Lookup(e.Workload)
		if _, ok := w.(workload.Networked); err != nil || !ok {
			continue
		}
		for _, p := range w.Programs() {
			if p.Package != "" && !slices.Contains(progs, p) {
				progs = append(progs, p)
			}
		}
	}
	return progs
}

// startRemotePeer starts vfleet's agent on the peer m reaches and wires
// the peer's NIC for path, both recorded in the run's ledger first, and
// takes the peer's fingerprint. On error, what it made there is removed
// (or left in the ledger for `vfleet clean`) and m is closed.
func startRemotePeer(ctx context.Context, m *remote.Machine, found []remote.Found, nw *scenario.Network, path netpath.Path, env guest.Env, agentFor func(string) (string, error)) (_ *remotePeer, err error) {
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("network peer %s: %w", m.Target, err), m.Close(context.WithoutCancel(ctx)))
		}
	}()
	if agentFor == nil {
		return nil, errors.New("no agent for the peer's architecture: the runner was given none")
	}
	began := time.Now()
	if err := m.StartAgent(ctx, env.Ledger, agentFor); err != nil {
		return nil, err
	}
	if err := m.Wire(ctx, env.Ledger, peerWiring(nw, path)); err != nil {
		return nil, err
	}
	fp, err := m.Fingerprint(ctx, nw.PeerNIC, found)
	if err != nil {
		return nil, err
	}
	c, err := m.Agent(ctx)
	if err != nil {
		return nil, err
	}
	return &remotePeer{m: m, client: c, boot: time.Since(began), fp: fp}, nil
}

// peerWiring is the peer's side of path's uplink on its NIC: the path's
// peer address, and its routes to the guests through the host side.
func peerWiring(nw *scenario.Network, path netpath.Path) remote.Wiring {
	u := netpath.UplinkOf(path)
	return remote.Wiring{NIC: nw.PeerNIC, Addr: u.Peer, Via: u.Host.Addr(), Routes: u.Routes}
}

func (p *remotePeer) Spec() guest.Spec {
	return guest.Spec{Name: scenario.PeerName, Kind: KindRemotePeer}
}

// Start does nothing: startRemotePeer started it.
func (p *remotePeer) Start(context.Context) error { return nil }

func (p *remotePeer) Exec(ctx context.Context, req agent.Request) (agent.Reply, error) {
	return p.client.Do(ctx, req)
}

func (p *remotePeer) Info() guest.Info {
	return guest.Info{Kind: KindRemotePeer, BootTime: p.boot, ScratchDir: p.m.WorkDir()}
}

// Stop hangs up on the agent, whose servers die with it, and cleans the
// peer (Machine.Close).
func (p *remotePeer) Stop(ctx context.Context) error {
	p.client.Close()
	return p.m.Close(ctx)
}

// details are the peer's part of its stored record: which machine, with
// which host key, and its fingerprint as the host's is stored.
func (p *remotePeer) details() map[string]string {
	// Plain fields only: it cannot fail.
	fp, _ := json.Marshal(p.fp)
	return map[string]string{store.DetailPeerURL: p.m.Target.String(), store.DetailPeerHostKey: p.m.HostKey, store.DetailPeerFingerprint: string(fp)}
}
