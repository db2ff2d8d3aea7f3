package report

import (
	"fmt"

	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/store"
)

// A step ran on a busy host when, averaged over the step, processes that
// are not the run's used more than BusyOtherCores of one core, or a
// hypervisor stole more than BusyStealShare of the CPUs' time. Below
// them an idle host's own daemons and the tick-granular accounting
// (10 ms a CPU) stay quiet; above, the run's intervals widen with what
// else the host did.
const (
	BusyOtherCores = 0.25
	BusyStealShare = 0.02
)

// HostLoad is what the host did besides the run while its steps ran.
type HostLoad struct {
	// Steps is how many measured steps' load was read; 0: not read (a
	// run stored before vfleet read it).
	Steps int `json:"steps"`
	// BusySteps is how many of them ran on a busy host.
	BusySteps int  `json:"busy_steps"`
	Busy      bool `json:"busy"`
	// The other processes' CPU in cores and the share stolen, the mean
	// over the steps and the most any one step saw.
	OtherCoresMean float64 `json:"other_cores_mean"`
	OtherCoresMax  float64 `json:"other_cores_max"`
	StealMean      float64 `json:"steal_share_mean"`
	StealMax       float64 `json:"steal_share_max"`
}

// stepFigures are one step's other processes' cores and stolen share;
// false for a step too short to have a tick.
func stepFigures(l store.StepLoad) (other, steal float64, ok bool) {
	if l.TotalTicks <= 0 || l.CPUs < 1 {
		return 0, 0, false
	}
	tick := 1e9 / float64(procfs.UserHZ)
	elapsed := float64(l.TotalTicks) / float64(l.CPUs) * tick // ns, per CPU
	other = max(float64(l.TaskTicks)*tick-float64(l.OwnNS), 0) / elapsed
	return other, float64(l.StealTicks) / float64(l.TotalTicks), true
}

// SummarizeLoad is a run's host load from its steps'.
func SummarizeLoad(loads []store.StepLoad) HostLoad {
	var h HostLoad
	n := 0
	for _, l := range loads {
		h.Steps++
		other, steal, ok := stepFigures(l)
		if !ok {
			continue
		}
		n++
		h.OtherCoresMean += other
		h.StealMean += steal
		h.OtherCoresMax = max(h.OtherCoresMax, other)
		h.StealMax = max(h.StealMax, steal)
		if other > BusyOtherCores || steal > BusyStealShare {
			h.BusySteps++
		}
	}
	if n > 0 {
		h.OtherCoresMean /= float64(n)
		h.StealMean /= float64(n)
	}
	h.Busy = h.BusySteps > 0
	return h
}

// loadNote says when the host was busy, or that its load was not read;
// "" for a quiet host, or when the caller did not read it.
func loadNote(h *HostLoad) string {
	switch {
	case h == nil:
		return ""
	case h.Steps == 0:
		return "the host's load during the steps was not read (a run stored before vfleet read it): whether other work widened the intervals is not known"
	case h.Busy:
		return fmt.Sprintf("the host was busy during %d of %d steps: other processes used up to %.2f cores (%.2f on average), a hypervisor stole up to %.1f%% of the CPUs (%.1f%%); every interval widens with it",
			h.BusySteps, h.Steps, h.OtherCoresMax, h.OtherCoresMean, 100*h.StealMax, 100*h.StealMean)
	}
	return ""
}

// loadSummary is the host's load in a few words, for the page's
// environment.
func loadSummary(h *HostLoad) string {
	if h.Steps == 0 {
		return "not read"
	}
	state := "quiet"
	if h.Busy {
		state = fmt.Sprintf("busy during %d of %d steps", h.BusySteps, h.Steps)
	}
	return fmt.Sprintf("%s: other processes up to %.2f cores (mean %.2f), steal up to %.1f%% (mean %.1f%%)",
		state, h.OtherCoresMax, h.OtherCoresMean, 100*h.StealMax, 100*h.StealMean)
}
