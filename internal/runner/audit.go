package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

// auditWorkload names the audit's failures, as a step's are named by their
// workload.
const auditWorkload = "audit"

// auditPort is the port reachability probes knock on. Nothing in a run
// listens there, so an address that can be reached answers at once with a
// refusal, and one that cannot is not answered at all.
const auditPort = 1

// auditTimeout bounds one guest's probes: reading a few files and the
// handshakes, which end within probe.ReachTimeout; the escape attempts
// add a child in a user namespace of its own and a few mounts (a VM under
// emulation is slow at both).
const (
	auditTimeout  = 30 * time.Second
	attackTimeout = 90 * time.Second
)

// guestsPerGroupReached is how many guests of each group every guest tries
// to reach: two, so that a group's guests reaching one another shows too,
// while a fleet of hundreds is not probed pair by pair.
const guestsPerGroupReached = 2

// selfExe runs the agent's own binary, wherever the guest keeps it: the
// path resolves in the agent's child before it executes.
const selfExe = "/proc/self/exe"

// audit runs the isolation probes in each of the named guests that
// started, through its agent, so that they hold what the workloads hold;
// the host's own view is recorded once, beside them. A guest whose audit
// fails is a failure of the run like a step's; the run goes on.
func (r *run) audit(ctx context.Context, names []string) error {
	var started []string
	for _, n := range names {
		if r.guests[n] != nil {
			started = append(started, n)
		}
	}
	if len(started) == 0 {
		return nil
	}
	r.opts.Progress.Phase(r.label+"audit isolation", len(started))
	var recs []store.AuditRecord
	if !r.audited {
		ev := probe.Collect(ctx, nil)
		if r.net != nil {
			links, err := r.net.net.LinksIntoRoot()
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			ev.LinksIntoRoot = links
		}
		host, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		recs = append(recs, store.AuditRecord{Evidence: host})
		r.audited = true
	}
	groups := r.groupsOf()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.opts.StartConcurrency)
	for _, name := range started {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			g := r.guests[name]
			ev, stderr, err := auditGuest(ctx, g, r.auditTargets(name, groups), r.opts.Attack)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.failure(ctx, name, groups[name], auditWorkload, -1, err, stderr)
			} else {
				recs = append(recs, store.AuditRecord{Guest: name, Group: groups[name], Kind: g.Spec().Kind, Evidence: ev})
			}
			r.opts.Progress.Item(name, err)
		}()
	}
	wg.Wait()
	slices.SortFunc(recs, func(a, b store.AuditRecord) int { return strings.Compare(a.Guest, b.Guest) })
	if err := r.opts.Store.AddAudits(context.WithoutCancel(ctx), r.id, recs); err != nil {
		return r.storeFailed(err)
	}
	return nil
}

// auditGuest runs the probes in one guest, and the escape attempts when
// asked, and checks that what came back is evidence.
func auditGuest(ctx context.Context, g guest.Guest, targets []string, attacks bool) (json.RawMessage, []byte, error) {
	argv, timeout := []string{selfExe, probe.ProbeArg}, auditTimeout
	if attacks {
		argv, timeout = append(argv, attack.Arg), attackTimeout
	}
	reply, err := g.Exec(ctx, agent.Request{Argv: append(argv, targets...), Dir: g.Info().ScratchDir,
		TimeoutMS: timeout.Milliseconds()})
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	switch {
	case reply.Error != "":
		return nil, reply.Stderr, fmt.Errorf("audit: %s", reply.Error)
	case !reply.Succeeded():
		return nil, reply.Stderr, fmt.Errorf("audit: %w", execError(reply))
	}
	var ev probe.Evidence
	if err := json.Unmarshal(reply.Stdout, &ev); err != nil {
		return nil, reply.Stderr, fmt.Errorf("audit: the agent's evidence is not JSON: %w", err)
	}
	return json.RawMessage(reply.Stdout), nil, nil
}

// groupsOf maps every planned guest to its group.
func (r *run) groupsOf() map[string]string {
	groups := map[string]string{}
	for _, pg := range r.plan.Guests {
		groups[pg.Spec.Name] = pg.Group
	}
	return groups
}

// auditTargets are the addresses a guest tries to reach, as NAME=ADDR:PORT:
// the peer and the host side as its data path sees them, and the first
// guests of every group that started. None without a network.
func (r *run) auditTargets(name string, groups map[string]string) []string {
	if r.net == nil {
		return nil
	}
	own, ok := r.net.views[name]
	if !ok {
		return nil
	}
	target := func(label string, a netip.Addr) string {
		return label + "=" + netip.AddrPortFrom(a, auditPort).String()
	}
	out := []string{target(probe.TargetPeer, own.peer.Addr)}
	// A guest on a network of its own has no host side on its way.
	if own.hostSide.IsValid() {
		out = append(out, target(probe.TargetHostSide, own.hostSide))
	}
	perGroup := map[string]int{}
	for _, pg := range r.plan.Guests {
		other := pg.Spec.Name
		v, ok := r.net.views[other]
		if other == name || !ok || r.guests[other] == nil || perGroup[groups[other]] == guestsPerGroupReached {
			continue
		}
		perGroup[groups[other]]++
		out = append(out, target(other, v.addr))
	}
	return out
}
