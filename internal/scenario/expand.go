package scenario

import (
	"fmt"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/workload"
)

// Expand turns the spec into the guests to start and the steps to run.
//
// A group with count 1 keeps its name; a group with count N yields
// NAME-0 … NAME-(N-1). Steps go workload by workload: first the warm-ups
// (each guest in turn), then repetition by repetition with every guest in
// turn, so that slow drift of the machine (heat, other tenants) touches
// every guest alike instead of biasing whichever ran last.
func (s *Spec) Expand() *Plan {
	plan := &Plan{Spec: s}
	for _, g := range s.Guests {
		for i := 0; i < g.Count; i++ {
			plan.Guests = append(plan.Guests, PlannedGuest{Group: g.Name, Network: g.Network, Spec: guest.Spec{
				Name: guestName(g, i), Kind: g.Kind, Runtime: g.Runtime, CPUs: g.CPUs, MemoryBytes: g.MemoryBytes, CPULimit: g.CPULimit,
				VCPUs: g.VCPUs, Accel: g.Accel, Disk: g.Disk, PinVCPUs: g.PinVCPUs, RTPriority: g.RTPriority,
			}})
		}
	}
	for _, w := range s.Workloads {
		d := w.Duration
		if d == 0 {
			d = s.Duration
		}
		step := func(g PlannedGuest, rep int, warm bool) Step {
			return Step{Guest: g.Spec.Name, Group: g.Group, WorkloadID: w.ID, Workload: w.Workload,
				Params: copyParams(w.Params), Duration: d, Repetition: rep, Warmup: warm}
		}
		for rep := 0; rep < s.Warmup; rep++ {
			for _, g := range plan.Guests {
				plan.Steps = append(plan.Steps, step(g, rep, true))
			}
		}
		for rep := 0; rep < s.Repetitions; rep++ {
			for _, g := range plan.Guests {
				plan.Steps = append(plan.Steps, step(g, rep, false))
			}
		}
	}
	return plan
}

// guestName names the i-th guest of a group; Parse relies on it to check
// that no two guests of a plan share a name.
func guestName(g GuestGroup, i int) string {
	if g.Count == 1 {
		return g.Name
	}
	return fmt.Sprintf("%s-%d", g.Name, i)
}

func copyParams(p workload.Params) workload.Params {
	out := make(workload.Params, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}
