package audit

import (
	"strings"

	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
)

// EscapeVerdict is what an escape attempt came to.
type EscapeVerdict string

const (
	// EscapeBlocked: the guest's isolation stopped it.
	EscapeBlocked EscapeVerdict = "blocked"
	// EscapeContained: it went through, but what it reached was the
	// guest's own (its own kernel, root, namespaces or files).
	EscapeContained EscapeVerdict = "contained"
	// Escaped: it reached the host.
	Escaped EscapeVerdict = "escaped"
)

// Escape is one attempt's judged result.
type Escape struct {
	Attempt   string        `json:"attempt"`
	Technique string        `json:"technique"`
	Verdict   EscapeVerdict `json:"verdict"`
	// Detail is what stopped it, or what it got.
	Detail string `json:"detail"`
}

// JudgeAttacks says, attempt by attempt, whether what a guest's escape
// attempts reached was the host: an attempt that went through in a kernel
// of the guest's own (a VM's, gVisor's) reached that kernel only; on the
// host's kernel, one that reached a root directory, a namespace or a
// process reached the host's only when it is the host's own (the host's
// evidence names them), and one on the kernel itself (a setting, a
// device, a module, a cgroup's release agent) reached the host.
func JudgeAttacks(g, host probe.Evidence, kernel string) []Escape {
	var out []Escape
	for _, a := range g.Attacks {
		e := Escape{Attempt: a.Name, Technique: a.Technique, Verdict: EscapeBlocked, Detail: a.By}
		if a.Outcome == attack.Succeeded {
			e.Verdict, e.Detail = judge(a, g, host, kernel)
		}
		out = append(out, e)
	}
	return out
}

func judge(a attack.Attempt, g, host probe.Evidence, kernel string) (EscapeVerdict, string) {
	switch {
	case kernel == guest.KernelGVisor:
		return EscapeContained, "in gVisor's kernel: " + a.Evidence
	case OwnKernel(g, host):
		return EscapeContained, "in its own kernel: " + a.Evidence
	}
	own := func(what string) (EscapeVerdict, string) {
		return EscapeContained, a.Evidence + "; " + what
	}
	switch a.Name {
	case attack.ProcRoot, attack.Shocker:
		if a.Reached == "" || a.Reached != host.RootID {
			return own("not the host's root (" + host.RootID + ")")
		}
	case attack.ProcNS:
		if a.Reached != host.Namespaces["mnt"] {
			return own("not the host's (" + host.Namespaces["mnt"] + ")")
		}
	case attack.Ptrace:
		if a.Reached != host.Namespaces["pid"] {
			return own("a process of its own PID namespace, not the host's (" + host.Namespaces["pid"] + ")")
		}
	case attack.ExeOverwrite:
		// A binary on the guest's own root file system is the guest's
		// copy; one on another device was mounted in from the host.
		if g.RootID != host.RootID && a.Reached == device(g.RootID) {
			return own("the guest's own copy, on its root file system")
		}
	case attack.UserNSMount:
		return own("its own namespaces, not the host's")
	}
	return Escaped, a.Evidence
}

// device is the "major:minor" of an attack.FileID.
func device(fileID string) string {
	i := strings.LastIndexByte(fileID, ':')
	if i < 0 {
		return fileID
	}
	return fileID[:i]
}

// escapedCount counts the attempts that reached the host.
func escapedCount(es []Escape) int {
	n := 0
	for _, e := range es {
		if e.Verdict == Escaped {
			n++
		}
	}
	return n
}
