// Package agent owns the protocol between vfleet on the host and
// vfleet-agent inside a guest, and both of its ends.
//
// The wire format is newline-delimited JSON over any byte stream (a unix
// socket bind-mounted into a container, a virtio-serial port, a pipe). On
// connect the agent sends a Hello carrying the protocol version; after that
// the host sends Requests and the agent answers each with exactly one Reply,
// in order. A request the agent cannot decode or does not understand gets a
// Reply with Error set; the connection stays usable. A peer speaking another
// protocol version is refused at the hello, before any work is done.
package agent
