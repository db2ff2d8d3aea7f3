package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// netCommand is a user's networked program: command's client, measured
// in the guest (or, with client: peer, on the peer), its own server on the
// other side for the whole run, and commands there before and after each
// measurement (a warm cache, a counter reset, a log collected). Its output
// is parsed as command's is.
type netCommand struct{ command }

func init() { Register(netCommand{}) }

// Placeholders in a net-command's argv, server, pre and post, beside
// DurationPlaceholder: the server's address as the client sees it, and
// the port the guest's server of this workload listens on.
const (
	PeerPlaceholder = "{peer}"
	PortPlaceholder = "{port}"
)

func (netCommand) Name() string { return "net-command" }

func (netCommand) Defaults() Params {
	d := command{}.Defaults()
	d["server"], d["proto"], d["pre"], d["post"], d[ParamClient] = "", "tcp", "", "", ClientGuest
	return d
}

// StructuredParams: every program is a list, metrics a list of mappings.
func (netCommand) StructuredParams() []string {
	return []string{"argv", "metrics", "server", "pre", "post"}
}

// netCommandSpec is a net-command's parameters decoded.
type netCommandSpec struct {
	commandSpec
	server, pre, post []string // nil when not given
	proto             string
}

func (w netCommand) decode(p Params) (netCommandSpec, error) {
	c, err := w.command.decode(p)
	if err != nil {
		return netCommandSpec{}, err
	}
	n := netCommandSpec{commandSpec: c}
	for key, dst := range map[string]*[]string{"server": &n.server, "pre": &n.pre, "post": &n.post} {
		if *dst, err = decodeArgv(p, key); err != nil {
			return n, err
		}
	}
	if n.proto, err = enumParam(p, "proto", "tcp", "udp"); err != nil {
		return n, err
	}
	return n, checkClient(p)
}

func (w netCommand) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	_, err := w.decode(p)
	return err
}

func (w netCommand) Command(Params, time.Duration) (Exec, error) {
	return Exec{}, fmt.Errorf("%s: %w", w.Name(), ErrNeedsNetwork)
}

// Servers is the user's server, when there is one, with {peer} its
// side's address: its own argv binds to it or not (at.Only is vfleet's
// servers' to honour). Its name is made from its command, so two entries
// with one server share the process.
func (w netCommand) Servers(p Params, at Listen) []Server {
	n, err := w.decode(p)
	if err != nil || n.server == nil {
		return nil
	}
	port := at.Port + portCommand
	sum := sha256.Sum256([]byte(n.proto + "\x00" + strings.Join(n.server, "\x00")))
	return []Server{{Name: "net-command-" + hex.EncodeToString(sum[:6]), Argv: replaceEach(n.server, portReplacer(port, addrText(at.Addr))),
		Proto: n.proto, Port: port}}
}

// addrText is a's text, "" for none.
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func (w netCommand) NetCommand(p Params, d time.Duration, peer Peer) (NetExec, error) {
	n, err := w.decode(p)
	if err != nil {
		return NetExec{}, err
	}
	r := portReplacer(peer.Port+portCommand, peer.Addr.String(), DurationPlaceholder, strconv.Itoa(seconds(d)))
	ne := NetExec{Exec: n.exec(d, r)}
	for _, side := range []struct {
		argv []string
		dst  *[]Exec
	}{{n.pre, &ne.ServerPre}, {n.post, &ne.ServerPost}} {
		if side.argv != nil {
			*side.dst = []Exec{{Argv: replaceEach(side.argv, r), Timeout: timeoutFor(d)}}
		}
	}
	return ne, nil
}

// portReplacer replaces the port placeholder, the peer's when it is
// known, and any further pairs.
func portReplacer(port int, peer string, more ...string) *strings.Replacer {
	pairs := append([]string{PortPlaceholder, strconv.Itoa(port)}, more...)
	if peer != "" {
		pairs = append(pairs, PeerPlaceholder, peer)
	}
	return strings.NewReplacer(pairs...)
}

func replaceEach(argv []string, r *strings.Replacer) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	return out
}
