package qemu

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/vfleet/vfleet/internal/remote"
)

// libvirtURIForms are the URIs the libvirt field takes, for its errors.
const libvirtURIForms = LibvirtSystem + " or qemu+ssh://USER@HOST[:PORT]/system[?keyfile=FILE&known_hosts=FILE&socket=PATH]"

// remoteLibvirtSocket is where a remote host's system libvirt answers
// unless the URI's socket says otherwise, as libvirt's own client assumes.
const remoteLibvirtSocket = "/var/run/libvirt/libvirt-sock"

// libvirtParams are the parameters of libvirt's ssh transport vfleet
// takes; libvirt's others run a command on the remote host (command,
// netcat, proxy, mode), or prompt (no_tty, sshauth), which an unattended
// vfleet never does.
var libvirtParams = []string{"keyfile", "known_hosts", "socket"}

// libvirtURI is a libvirt the libvirt field names: this host's system
// libvirt, or another host's reached over SSH.
type libvirtURI struct {
	URI string // as the scenario gave it
	// Remote: another host's, through Target with SSH's settings.
	Remote bool
	Target remote.Target
	SSH    remote.Config
	// Socket is libvirt's socket on the remote host.
	Socket string
}

// parseLibvirtURI reads a libvirt URI as libvirt spells it
// (https://libvirt.org/uri.html), with what vfleet takes of it: the
// system instance only (transient domains as root under a static DAC
// label), keys and known hosts as internal/remote checks them, and never
// an unchecked host key.
func parseLibvirtURI(s string) (libvirtURI, error) {
	bad := func(why string, args ...any) (libvirtURI, error) {
		return libvirtURI{}, fmt.Errorf("%q is not allowed: %s; want %s", s, fmt.Sprintf(why, args...), libvirtURIForms)
	}
	if s == LibvirtSystem {
		return libvirtURI{URI: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URI")
	}
	switch {
	case u.Scheme == "qemu":
		return bad("this host's libvirt is %s", LibvirtSystem)
	case u.Scheme != "qemu+ssh":
		return bad("the driver must be qemu and the transport, for another host, ssh")
	case u.Path != "/system":
		return bad("vfleet's domains run in libvirt's system instance (/system), not %q", u.Path)
	case u.User == nil || u.User.Username() == "":
		return bad("no user: vfleet runs unattended and does not guess whose keys the host accepts")
	case hasPassword(u):
		return bad("a password does not belong in the URI: vfleet authenticates with keys only")
	case u.Fragment != "":
		return bad("a fragment")
	}
	// The target as internal/remote reads one, which checks the host and
	// port the same way for every remote machine vfleet reaches.
	target, err := remote.ParseURL((&url.URL{Scheme: "ssh", User: url.User(u.User.Username()), Host: u.Host}).String())
	if err != nil {
		return bad("%v", err)
	}
	r := libvirtURI{URI: s, Remote: true, Target: target, Socket: remoteLibvirtSocket}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("its query: %v", err)
	}
	for key, values := range q {
		if len(values) != 1 || values[0] == "" {
			return bad("%s needs one value", key)
		}
		v := values[0]
		switch key {
		case "no_verify":
			if v != "0" {
				return bad("no_verify skips the check of the host's key, which vfleet always makes: add the key to known_hosts instead")
			}
		case "keyfile":
			r.SSH.Identity = v
		case "known_hosts":
			r.SSH.KnownHosts = v
		case "socket":
			if !strings.HasPrefix(v, "/") {
				return bad("socket %q is not an absolute path", v)
			}
			r.Socket = v
		default:
			return bad("parameter %s is not taken (vfleet takes %s)", key, strings.Join(libvirtParams, ", "))
		}
	}
	return r, nil
}

func hasPassword(u *url.URL) bool {
	_, set := u.User.Password()
	return set
}

// checkLibvirtURI is the libvirt field's check, at load: the URI, and the
// key files a remote one names, checked as every key file is.
func checkLibvirtURI(s string) error {
	r, err := parseLibvirtURI(s)
	if err != nil || !r.Remote {
		return err
	}
	return r.SSH.Check()
}
