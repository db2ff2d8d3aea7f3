package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// PeerOptions say which remote peer to check and what it must have.
type PeerOptions struct {
	Target remote.Target
	Config remote.Config
	// Programs are those the peer runs (the network workloads' servers).
	Programs []programs.Program
	// AgentFor finds vfleet's agent for a Debian architecture; nil checks
	// for none.
	AgentFor func(arch string) (string, error)
}

// Peer checks a remote peer without starting anything there: reachable,
// its host key known, a key accepted, its architecture and an agent for
// it here, the programs with their versions, a work directory it lets
// vfleet make (made and removed at once). Each check needs the one before
// it; after a failure the rest are skipped, saying why.
func Peer(ctx context.Context, o PeerOptions) []Result {
	var out []Result
	skipRest := func(names []string, why string) []Result {
		for _, n := range names {
			out = append(out, Result{Name: n, Status: Skip, Detail: why})
		}
		return out
	}
	const (
		reach   = "peer reachable"
		hostKey = "peer host key"
		auth    = "peer authentication"
	)
	later := []string{"peer architecture", "peer programs", "peer work directory"}
	m, err := remote.Dial(ctx, o.Target, o.Config)
	switch {
	case errors.Is(err, remote.ErrNoCredentials):
		const why = "no credentials to log in with"
		out = append(out, Result{Name: reach, Status: Skip, Detail: why}, Result{Name: hostKey, Status: Skip, Detail: why},
			Result{Name: auth, Status: Missing, Detail: err.Error(), Fix: "start an SSH agent holding your key (ssh-add), or give an identity file"})
		return skipRest(later, why)
	case errors.Is(err, remote.ErrKnownHosts):
		const why = "not tried: known_hosts could not be read"
		out = append(out, Result{Name: reach, Status: Skip, Detail: why},
			Result{Name: hostKey, Status: Fail, Detail: err.Error(), Fix: "give a known_hosts file (a regular file), or none for ~/.ssh/known_hosts"})
		return skipRest(append([]string{auth}, later...), why)
	case errors.Is(err, remote.ErrIdentity):
		const why = "not tried: the identity could not be read"
		out = append(out, Result{Name: reach, Status: Skip, Detail: why}, Result{Name: hostKey, Status: Skip, Detail: why},
			Result{Name: auth, Status: Fail, Detail: err.Error(), Fix: "give a private key file without passphrase, or none to offer the SSH agent's keys"})
		return skipRest(later, why)
	case errors.Is(err, remote.ErrHostKeyUnknown), errors.Is(err, remote.ErrHostKeyChanged):
		out = append(out, Result{Name: reach, Status: OK, Detail: o.Target.String() + " speaks SSH"},
			Result{Name: hostKey, Status: Fail, Detail: err.Error(), Fix: "check the fingerprint with whoever runs the peer before you accept it"})
		return skipRest(append([]string{auth}, later...), "the host key is not trusted")
	case errors.Is(err, remote.ErrAuth):
		out = append(out, Result{Name: reach, Status: OK, Detail: o.Target.String() + " speaks SSH"},
			Result{Name: hostKey, Status: OK, Detail: "known"},
			Result{Name: auth, Status: Fail, Detail: err.Error(), Fix: "add your public key to the peer user's authorized_keys"})
		return skipRest(later, "not logged in")
	case err != nil:
		out = append(out, Result{Name: reach, Status: Fail, Detail: err.Error(), Fix: "check the address, the port and that sshd runs there"})
		return skipRest(append([]string{hostKey, auth}, later...), "the peer is not reachable")
	}
	defer m.Close(context.WithoutCancel(ctx))
	out = append(out, Result{Name: reach, Status: OK, Detail: o.Target.String() + " speaks SSH"},
		Result{Name: hostKey, Status: OK, Detail: m.HostKey},
		Result{Name: auth, Status: OK, Detail: "as " + o.Target.User})

	arch, err := m.Arch(ctx)
	switch {
	case err != nil:
		out = append(out, Result{Name: later[0], Status: Fail, Detail: err.Error()})
	default:
		r := Result{Name: later[0], Status: OK, Detail: arch}
		if o.AgentFor != nil {
			if _, err := o.AgentFor(arch); err != nil {
				r.Status, r.Detail, r.Fix = Missing, arch+", but no agent for it here", err.Error()
			}
		}
		out = append(out, r)
	}

	found, err := m.CheckPrograms(ctx, o.Programs)
	if err != nil && !errors.Is(err, tools.ErrMissing) {
		out = append(out, Result{Name: later[1], Status: Fail, Detail: err.Error()})
	} else {
		for _, p := range o.Programs {
			r := Result{Name: "peer " + p.Name, Status: Missing, Detail: "not in the peer's PATH", Fix: "install the Debian package " + p.Package + " on the peer"}
			if i := slices.IndexFunc(found, func(f remote.Found) bool { return f.Name == p.Name }); i >= 0 {
				f := found[i]
				r = Result{Name: r.Name, Status: OK, Detail: fmt.Sprintf("%s (%s %s)", f.Path, f.Package, orUnknown(f.Version))}
			}
			out = append(out, r)
		}
	}

	if dir, err := m.ProbeWorkDir(ctx); err != nil {
		out = append(out, Result{Name: later[2], Status: Fail, Detail: err.Error(), Fix: "give the peer's user a writable TMPDIR (or /tmp)"})
	} else {
		out = append(out, Result{Name: later[2], Status: OK, Detail: "made and removed " + dir})
	}
	return out
}

func orUnknown(v string) string {
	if v == "" {
		return "version unknown"
	}
	return v
}
