package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/guest"

	"github.com/vfleet/vfleet/internal/density"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// Density samples, per guest and per group, under the pseudo-workload
// workload.DensityWorkload (footprint, not a workload's performance).
const (
	// metricGuestPSS is everything the guest costs the host in memory: its
	// processes on the host (for a VM, QEMU with the guest's RAM in it).
	metricGuestPSS = "density.guest_pss_bytes"
	// metricAgentPSS is vfleet's own share: its agent on the host. A VM's
	// agent lives in the guest's RAM, a gVisor container's in its sandbox,
	// and is counted there.
	metricAgentPSS = "density.vfleet_pss_bytes"
	// metricGuestRSS is the same processes' resident memory, shared pages
	// counted in full: what the guest would cost alone.
	metricGuestRSS = "density.guest_rss_bytes"
	// metricGuestShared and metricGuestPrivate split the RSS: pages other
	// processes map too (libraries; a clone's template pages; KSM's
	// merged pages) and pages the guest's processes alone hold.
	metricGuestShared  = "density.guest_shared_bytes"
	metricGuestPrivate = "density.guest_private_bytes"
	// metricGuestRAM is a VM's guest RAM's share of its PSS, and
	// metricVMMOverhead what QEMU holds beyond it: its heap, TCG's
	// translation cache, device state, libraries.
	metricGuestRAM    = "density.guest_ram_pss_bytes"
	metricVMMOverhead = "density.vmm_overhead_pss_bytes"
	// metricDisk is what the guest's own layer and state take on disk,
	// beside the image every guest shares (metricBase, once per group).
	metricDisk = "density.disk_bytes"
	metricBase = "density.shared_image_bytes"
	// metricIdleCPU is the CPU the group's host-side processes used while
	// the fleet idled, and metricVfleetCPU what of it was vfleet's (its
	// agents, and the vfleet process itself, the same for every group).
	metricIdleCPU   = "density.idle_cpu_pct"
	metricVfleetCPU = "density.vfleet_idle_cpu_pct"
)

// storeDensity measures the idle fleet of a phase: memory and disk per
// guest, and the CPU vfleet and the guests use while nothing runs.
func (r *run) storeDensity(ctx context.Context, ph scenario.Phase) error {
	params, noise := phaseParams(ph), r.noiseGuests()
	type member struct {
		name, group string
		pids        []int
		agentOnHost bool
		ramBytes    int64 // a VM's guest RAM; 0 for other kinds
	}
	var members []member
	for _, name := range ph.Guests {
		g := r.guests[name]
		// A guest run elsewhere (a pod) has no process here to measure:
		// zeros would read as a free guest.
		if g == nil || noise[name] || guest.TraitsOf(g.Spec()).Elsewhere {
			continue
		}
		info := g.Info()
		ramMiB, _ := strconv.ParseInt(info.Details["memory_mib"], 10, 64)
		members = append(members, member{name, r.records[name].Group, info.PIDs, !guest.TraitsOf(g.Spec()).AgentInGuest, ramMiB << 20})
	}
	if len(members) == 0 {
		return nil
	}
	groupMember := map[string]string{} // a guest of each group, for its kind
	for _, m := range members {
		groupMember[m.group] = m.name
	}
	groupCPU := func() map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, m := range members {
			t, err := density.CPUTime(m.pids)
			if err == nil {
				out[m.group] += t
			}
		}
		return out
	}
	before, selfBefore := groupCPU(), ownCPU()
	began := time.Now()
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(r.plan.Spec.Fleet.Idle):
	}
	after, selfAfter := groupCPU(), ownCPU()
	window := time.Since(began)
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / window.Seconds() }
	now := time.Now().UTC()
	var samples []store.Sample
	addBetter := func(guestName, group, metric, unit string, v float64, better workload.Better) {
		rec := r.records[guestName]
		if guestName == group {
			rec = r.records[groupMember[group]]
		}
		samples = append(samples, store.Sample{RunID: r.id, Guest: guestName, Group: group, Kind: rec.Kind, Runtime: rec.Runtime,
			WorkloadID: workload.DensityWorkload, Workload: workload.DensityWorkload, Params: params, Metric: metric, Unit: unit, Value: v,
			Better: better, At: now})
	}
	add := func(guestName, group, metric, unit string, v float64) {
		addBetter(guestName, group, metric, unit, v, workload.LowerIsBetter)
	}
	// Memory is read once KSM, when the run holds it, has merged what it
	// will: the figures are the fleet's steady state.
	if err := r.ksmSamples(ctx, addBetter); err != nil {
		return err
	}

	agentPSS, guestPSS, disk := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for _, m := range members {
		if u, err := density.Memory(m.pids); err == nil {
			add(m.name, m.group, metricGuestPSS, "B", float64(u.PSS))
			guestPSS[m.group] = append(guestPSS[m.group], float64(u.PSS))
			add(m.name, m.group, metricGuestRSS, "B", float64(u.RSS))
			add(m.name, m.group, metricGuestShared, "B", float64(u.Shared))
			add(m.name, m.group, metricGuestPrivate, "B", float64(u.Private))
			if m.ramBytes > 0 && len(m.pids) > 0 {
				if ram, err := density.RegionMemory(m.pids[0], m.ramBytes); err == nil && ram.RSS > 0 {
					add(m.name, m.group, metricGuestRAM, "B", float64(ram.PSS))
					add(m.name, m.group, metricVMMOverhead, "B", float64(u.PSS-ram.PSS))
				}
			}
			if m.agentOnHost {
				add(m.name, m.group, metricAgentPSS, "B", float64(u.PSS))
				agentPSS[m.group] = append(agentPSS[m.group], float64(u.PSS))
			}
		}
		if b, err := density.DiskUsage(filepath.Join(r.env.StateDir, m.name)); err == nil {
			add(m.name, m.group, metricDisk, "B", float64(b))
			disk[m.group] = append(disk[m.group], float64(b))
		}
	}
	groups := make([]string, 0, len(after))
	for g := range after {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	selfPct := pct(selfAfter - selfBefore)
	base, baseErr := r.sharedImageBytes()
	for _, g := range groups {
		if baseErr == nil {
			add(g, g, metricBase, "B", float64(base))
		}
		used := pct(after[g] - before[g])
		add(g, g, metricIdleCPU, "%", used)
		vfleet := selfPct
		if len(agentPSS[g]) > 0 {
			vfleet += used
		}
		add(g, g, metricVfleetCPU, "%", vfleet)
		r.opts.Progress.Logf("%sidle %s: vfleet %.2f%% of a core (this process %.2f%%), guests' host processes %.2f%%; per guest %s PSS (%s of it vfleet's), %s disk",
			r.label, g, vfleet, selfPct, used, formatBytes(mean(guestPSS[g])), formatBytes(mean(agentPSS[g])), formatBytes(mean(disk[g])))
	}
	return r.storeSamples(ctx, samples)
}

// sharedImageBytes is the size of the image every guest's layer sits on,
// measured once per run: it is the same for every fleet size.
func (r *run) sharedImageBytes() (int64, error) {
	r.imageOnce.Do(func() { r.imageBytes, r.imageErr = density.DiskUsage(r.opts.RootFS) })
	return r.imageBytes, r.imageErr
}

// ownCPU is this process's CPU time alone: its children (a baseline's
// agent, a VM's QEMU) are counted with their guests.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func formatBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}
