package runner

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/vfleet/vfleet/internal/ksm"
	"github.com/vfleet/vfleet/internal/workload"
)

// holdKSM switches the host's KSM on for the run when a guest of it asks
// for memory merging; the run's teardown, or `vfleet clean` after a crash,
// lets go of it and so puts the host's settings back.
func (r *run) holdKSM(ctx context.Context) error {
	var groups []string
	for _, g := range r.plan.Spec.Guests {
		if g.MemoryMerge {
			groups = append(groups, g.Name)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	entry, err := ksm.System.Hold(ctx, r.led, r.key)
	if entry.ID != "" {
		r.ksm = &entry
	}
	if err != nil {
		return fmt.Errorf("memory_merge in guest group %s: %w", groups[0], err)
	}
	r.opts.Progress.Logf("%sKSM on for memory_merge (%s) while the run lasts", r.label, ksm.Settings())
	return nil
}

// ksmSettle bounds the wait for KSM to merge a freshly launched fleet: two
// full passes of ksmd, which for 100 small VMs at the hold's pace takes
// tens of seconds.
const ksmSettle = 2 * time.Minute

// KSM samples: how much merging saved once it settled, per fleet size.
const (
	metricKSMSharing = "density.ksm_pages_sharing"
	metricKSMShared  = "density.ksm_pages_shared"
	metricKSMSaved   = "density.ksm_saved_bytes"
	metricKSMSettle  = "density.ksm_settle_s"
)

// ksmSamples waits for KSM to settle over the phase's fleet and returns
// its counters as samples of every group that merges memory; none when
// the run holds no KSM.
func (r *run) ksmSamples(ctx context.Context, add func(guest, group, metric, unit string, v float64, better workload.Better)) error {
	if r.ksm == nil {
		return nil
	}
	from, err := ksm.System.ReadStats()
	if err != nil {
		return err
	}
	r.opts.Progress.Logf("%swaiting for KSM to merge the fleet's memory (two full scans, at most %s)", r.label, ksmSettle)
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, ksmSettle)
	st, err := ksm.System.WaitScans(wctx, from, 2)
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	settled := time.Since(began)
	saved := float64(st.PagesSharing) * float64(os.Getpagesize())
	for _, g := range r.plan.Spec.Guests {
		if !g.MemoryMerge {
			continue
		}
		add(g.Name, g.Name, metricKSMSharing, "pages", float64(st.PagesSharing), workload.HigherIsBetter)
		add(g.Name, g.Name, metricKSMShared, "pages", float64(st.PagesShared), workload.LowerIsBetter)
		add(g.Name, g.Name, metricKSMSaved, "B", saved, workload.HigherIsBetter)
		add(g.Name, g.Name, metricKSMSettle, "s", settled.Seconds(), workload.LowerIsBetter)
	}
	r.opts.Progress.Logf("%sKSM after %s: %d pages shared by %d more (%s saved host-wide)", r.label,
		settled.Round(100*time.Millisecond), st.PagesShared, st.PagesSharing, formatBytes(saved))
	return nil
}
