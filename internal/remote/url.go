package remote

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ErrBadURL classifies a peer URL that is not ssh://USER@HOST[:PORT].
var ErrBadURL = errors.New("bad peer URL")

// DefaultPort is SSH's.
const DefaultPort = 22

// Target is a remote machine as a peer URL names it.
type Target struct {
	User string
	Host string // a name, an IPv4 address or an IPv6 address without brackets
	Port int
}

// Addr is the host and port to dial.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// String is the URL the target was parsed from, in its canonical form.
func (t Target) String() string { return "ssh://" + t.User + "@" + t.Addr() }

// Name is the machine as runs brought back from it and messages about it
// name it: USER@HOST:PORT, the URL without its scheme.
func (t Target) Name() string { return t.User + "@" + t.Addr() }

// ParseURL reads ssh://USER@HOST[:PORT]. The user is required, since
// vfleet runs unattended and must not guess whose keys the peer accepts;
// a password, a path, a query or a fragment is refused.
func ParseURL(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%w %q: %s (want ssh://USER@HOST[:PORT])", ErrBadURL, s, why)
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URL")
	}
	switch {
	case u.Scheme != "ssh":
		return bad("the scheme must be ssh")
	case u.Opaque != "":
		return bad("no // after ssh:")
	case u.User == nil || u.User.Username() == "":
		return bad("no user")
	case hasPassword(u):
		return bad("a password does not belong in the URL: vfleet authenticates with keys only")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.ForceQuery:
		return bad("only a user, a host and a port")
	case u.Hostname() == "":
		return bad("no host")
	}
	t := Target{User: u.User.Username(), Host: u.Hostname(), Port: DefaultPort}
	if strings.ContainsAny(t.User, " \t\n") {
		return bad("the user has white space")
	}
	if strings.HasPrefix(t.User, "-") {
		// ssh and every tool a hint names would take it for an option.
		return bad("the user starts with -")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port must be 1 to 65535")
		}
		t.Port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("an empty port")
	}
	return t, nil
}

func hasPassword(u *url.URL) bool {
	_, set := u.User.Password()
	return set
}
