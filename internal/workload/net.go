package workload

import (
	"errors"
	"net/netip"
	"time"
)

// A network workload has two sides. By default the server side runs in the
// run's peer namespace for the whole run, one set of servers per guest so
// that guests never share a listening socket, and the client side is the
// measured execution inside the guest; with ParamClient = ClientPeer the
// two swap. The runner owns both processes: the adapter only says which
// servers it needs and builds the client's argv for the server's address
// as the client sees it.

// Peer is where a network workload's client sends traffic: the peer's address as this guest sees
// it and the first of PortsPerGuest ports reserved for this guest's servers.
type Peer struct {
	Addr netip.Addr
	Port int
}

// Listen is where a guest's servers listen: Addr is their side's address
// as the client sees it, Port the first of the guest's PortsPerGuest
// ports. With Only they listen on Addr alone, not on every address of
// their side: on a remote peer, a machine with networks of its own.
type Listen struct {
	Addr netip.Addr
	Port int
	Only bool
}

// PortsPerGuest is the size of each guest's port range on the peer. An
// adapter's Servers must fit in it; ports are fixed offsets from the base
// so that Servers and NetCommand agree without sharing state.
const PortsPerGuest = 16

// Server is a long-running process the peer runs for the whole run; the runner starts it once per
// (guest, server Name), waits until Proto/Port is listening, and kills it at teardown.
type Server struct {
	// Name identifies the server among the guest's servers; two workloads
	// (or two parameter sets) asking for the same Name share one process,
	// so a Name must determine Argv.
	Name  string
	Argv  []string
	Proto string // "tcp" or "udp"
	Port  int
}

// NetExec is the measured client plus background load started just before it; every Background
// execution ends by itself shortly after the measured one (bounded durations).
type NetExec struct {
	Exec
	Background []Exec
	// ServerPre and ServerPost run on the server's side, one after the
	// other, before the background load starts and after the measured
	// client ends (a user's commands around a measurement).
	ServerPre, ServerPost []Exec
}

// Networked is implemented by workloads whose client needs a server on the
// peer. The runner calls Servers once per guest before the first step (at
// the guest's base port) and NetCommand for every step, with the Peer
// carrying the same address and base port.
type Networked interface {
	Workload
	// Servers lists the servers the parameters need; every Port lies in
	// [at.Port, at.Port+PortsPerGuest).
	Servers(p Params, at Listen) []Server
	// NetCommand builds the client executions for one measurement of the
	// given nominal duration against peer.
	NetCommand(p Params, duration time.Duration, peer Peer) (NetExec, error)
}

// ParamClient is the parameter every network workload takes to say which
// side runs its client: the guest (ClientGuest, the default: traffic
// starts in the guest) or the peer (ClientPeer: the servers run in the
// guest and the peer connects to it, the host-to-guest direction in which
// isolation layers often cost more).
const (
	ParamClient = "client"
	ClientGuest = "guest"
	ClientPeer  = "peer"
)

// ClientOf is the side that runs the client for validated parameters.
func ClientOf(p Params) string {
	if p[ParamClient] == ClientPeer {
		return ClientPeer
	}
	return ClientGuest
}

// checkClient accepts parameters without the key: they predate it.
func checkClient(p Params) error {
	if _, set := p[ParamClient]; !set {
		return nil
	}
	_, err := enumParam(p, ParamClient, ClientGuest, ClientPeer)
	return err
}

// ErrNeedsNetwork is wrapped by the plain Command of a Networked workload:
// without a peer there is nothing to connect to.
var ErrNeedsNetwork = errors.New("workload needs a network: add a network section to the scenario")

// Fixed offsets of each server in a guest's port range. Every network
// workload's servers get their own offset, so one guest can run both
// workloads against one peer.
const (
	portIperf3           = 0 // net-throughput's server, TCP and UDP on one port
	portSockperfUDP      = 1
	portSockperfTCP      = 2
	portIperf3Background = 3 // net-latency's background load, kept off the measured server
	portCommand          = 4 // the server of a user's net-command
	// portIperf3More is the first of net-throughput's further servers,
	// one for each client past the first when its streams exceed what one
	// iperf3 client opens.
	portIperf3More = 8
)
