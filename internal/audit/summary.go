package audit

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

// Report is a run's audit as reports show it: per guest group, the
// findings of its first guest, scored against the runtime default, and
// whom the group's guests reached.
type Report struct {
	Groups []Group `json:"groups"`
	// Targets are the reachability matrix's columns.
	Targets []string `json:"targets,omitempty"`
}

// Group is the audit of one guest group.
type Group struct {
	Group    string    `json:"group"`
	Kind     string    `json:"kind"`
	Security string    `json:"security,omitempty"`
	Guest    string    `json:"guest"` // whose findings these are
	Findings []Finding `json:"findings"`
	Weaker   int       `json:"weaker"`
	Stronger int       `json:"stronger"`
	// Differing are the group's other guests whose findings differ from
	// Guest's (a group's guests should all be alike).
	Differing []string `json:"differing,omitempty"`
	// Reach is, per target, how many of the group's guests reached it.
	Reach map[string]Reach `json:"reach,omitempty"`
	// Attacks are Guest's escape attempts, judged, when they were made;
	// Escaped counts those that reached the host.
	Attacks []Escape `json:"attacks,omitempty"`
	Escaped int      `json:"escaped,omitempty"`
}

// Reach counts a group's guests that reached one target, with one
// refusal's reason as evidence.
type Reach struct {
	Reached int    `json:"reached"`
	Tried   int    `json:"tried"`
	Why     string `json:"why,omitempty"`
}

// Summarize builds the report from a run's stored audit; guests gives each
// guest's security profile. A run without an audit has an empty report.
func Summarize(recs []store.AuditRecord, guests map[string]store.GuestRecord) (Report, error) {
	var host *probe.Evidence
	type probed struct {
		rec store.AuditRecord
		ev  probe.Evidence
	}
	var all []probed
	for _, r := range recs {
		var ev probe.Evidence
		if err := json.Unmarshal(r.Evidence, &ev); err != nil {
			return Report{}, fmt.Errorf("audit of %q: %w", r.Guest, err)
		}
		if r.Guest == "" {
			host = &ev
			continue
		}
		all = append(all, probed{r, ev})
	}
	if host == nil {
		return Report{}, nil
	}
	var rep Report
	index := map[string]int{}
	targets := map[string]bool{}
	for _, p := range all {
		kernel := guests[p.rec.Guest].Details[guest.KernelDetail]
		f := Assess(p.ev, *host, kernel)
		i, seen := index[p.rec.Group]
		if !seen {
			index[p.rec.Group] = len(rep.Groups)
			g := Group{Group: p.rec.Group, Kind: p.rec.Kind, Security: guests[p.rec.Guest].Details["security"], Guest: p.rec.Guest, Findings: f, Reach: map[string]Reach{},
				Attacks: JudgeAttacks(p.ev, *host, kernel)}
			g.Escaped = escapedCount(g.Attacks)
			for _, x := range f {
				switch x.Verdict {
				case Weaker:
					g.Weaker++
				case Stronger:
					g.Stronger++
				}
			}
			rep.Groups = append(rep.Groups, g)
			i = len(rep.Groups) - 1
		} else if !sameValues(f, rep.Groups[i].Findings) {
			rep.Groups[i].Differing = append(rep.Groups[i].Differing, p.rec.Guest)
		}
		root := rep.Groups[i].Reach[probe.TargetRoot]
		root.Tried++
		if reached, why := reachesRoot(p.ev, *host, kernel); reached {
			root.Reached++
		} else if root.Why == "" {
			root.Why = why
		}
		rep.Groups[i].Reach[probe.TargetRoot] = root
		targets[probe.TargetRoot] = true
		for target, verdict := range p.ev.Reach {
			targets[target] = true
			r := rep.Groups[i].Reach[target]
			r.Tried++
			if verdict == probe.Reachable {
				r.Reached++
			} else if r.Why == "" {
				r.Why = verdict
			}
			rep.Groups[i].Reach[target] = r
		}
	}
	for t := range targets {
		rep.Targets = append(rep.Targets, t)
	}
	sort.Slice(rep.Targets, func(a, b int) bool { return targetOrder(rep.Targets[a]) < targetOrder(rep.Targets[b]) })
	return rep, nil
}

// reachesRoot says whether a guest reaches the host's own network stack:
// it does when it shares the host's network namespace, or when a link
// leads from the run's namespaces into it. A gVisor guest's sockets are
// the host's, in the namespace its sandbox joined: the guest's own, as
// every container's (a runtime is always given one).
func reachesRoot(g, host probe.Evidence, kernel string) (bool, string) {
	gvisor := kernel == guest.KernelGVisor
	switch {
	case !gvisor && !OwnKernel(g, host) && slices.Contains(SharedNamespaces(g.Namespaces, host.Namespaces), "net"):
		return true, "shares the host's network namespace"
	case len(host.LinksIntoRoot) > 0:
		return true, "the run's namespaces link into it: " + strings.Join(host.LinksIntoRoot, ", ")
	case !gvisor && OwnKernel(g, host):
		return false, "another kernel, whose network is a device in the run's namespaces, none of which links into the root one"
	}
	return false, "its own network namespace; none of the run's namespaces links into the root one"
}

// targetOrder puts the peer, the host side and the root namespace before
// the guests.
func targetOrder(t string) string {
	switch t {
	case probe.TargetPeer:
		return "0"
	case probe.TargetHostSide:
		return "1"
	case probe.TargetRoot:
		return "2"
	}
	return "3" + t
}

func sameValues(a, b []Finding) bool {
	return slices.EqualFunc(a, b, func(x, y Finding) bool {
		// Process counts differ between guests of one group and say
		// nothing about their isolation.
		return x.Property == y.Property && (x.Value == y.Value || x.Property == "host processes visible")
	})
}
