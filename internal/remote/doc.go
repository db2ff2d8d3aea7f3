// Package remote reaches a network peer on another machine over SSH
// (golang.org/x/crypto/ssh; no ssh program, no shell-out per command):
// a peer URL (ssh://USER@HOST[:PORT]), its host key checked against
// known_hosts (an unknown or changed key is refused with its fingerprint
// and what to do), keys from the SSH agent or an identity file, never a
// password. A Machine runs commands there (their output at once, or
// streamed as it comes), copies files over a session's standard input,
// pushes directory trees as one tar stream, checks the programs a run needs (naming the Debian
// package of each one missing), describes the peer as hostinfo describes
// this host, and starts vfleet's agent for the peer's architecture in a
// work directory of its own, its control socket reached through the SSH
// connection, so nothing listens on the peer's network; and puts the
// peer's side of the test wire up (Wire: an address and routes on its
// NIC).
//
// What it starts or changes there is in the run's ledger first (KindPeer,
// KindPeerWire: the peer's URL, the known_hosts and identity files' paths
// and the host key's fingerprint, never a credential), so `vfleet clean`
// after a crash reconnects and removes the agent and its directory, and
// takes the wiring off.
package remote
