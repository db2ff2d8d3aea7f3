package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// lendsDevice says whether each guest of g takes a PCI device of the host.
func lendsDevice(g scenario.GuestGroup) bool {
	return netpath.VMDeviceOf(netpath.Path(g.Network)) == netpath.VMVFIO
}

// CatalogOf lists what a scenario can produce: its workload entries, whose
// metrics are known once the first size ran.
func CatalogOf(spec *scenario.Spec) Catalog {
	c := Catalog{}
	for _, w := range spec.Workloads {
		c[w.ID] = nil
	}
	return c
}

// Fleet measures a size by running the scenario at that size through the
// runner, each size an ordinary stored run.
type Fleet struct {
	Spec *scenario.Spec
	// Group is the scaled group, whose guests' samples decide a size.
	Group   string
	Options runner.Options
	Store   *store.Store
}

// ErrRun is wrapped by the error of a measurement whose run did not
// finish: its samples cannot decide a size.
var ErrRun = errors.New("measuring run did not finish")

// Measure runs the scenario with size guests in the scaled group.
func (f *Fleet) Measure(ctx context.Context, size int) ([]Sample, int64, error) {
	id, err := runner.Run(ctx, f.Spec.AtSize(size).Expand(), f.Options)
	if err != nil {
		return nil, id, err
	}
	run, err := f.Store.GetRun(ctx, id)
	if err != nil {
		return nil, id, err
	}
	switch run.Status {
	case store.StatusComplete, store.StatusCompleteWithFailures:
		// A failed step leaves its guest's sample out, and the size
		// fails for it.
	default:
		return nil, id, fmt.Errorf("run %d: %w: %s (%s)", id, ErrRun, run.Status, run.StatusReason)
	}
	stored, err := f.Store.Samples(ctx, id)
	if err != nil {
		return nil, id, err
	}
	return groupSamples(stored, f.Group, CatalogOf(f.Spec)), id, nil
}

// groupSamples keeps the scaled group's guests' own samples of the
// scenario's workloads: not the fixed groups', not the group's sums (a
// total is an SLO's scope, computed from the guests'), not launch or
// density figures.
func groupSamples(stored []store.Sample, group string, c Catalog) []Sample {
	var out []Sample
	for _, s := range stored {
		if _, ok := c[s.WorkloadID]; !ok || s.Group != group || workload.GroupFigure(s.Metric) {
			continue
		}
		out = append(out, Sample{Metric: s.WorkloadID + "." + s.Metric, Unit: s.Unit, Guest: s.Guest, Repetition: s.Repetition, Value: s.Value})
	}
	return out
}

// HostLimit is the largest size of the scaled group the host can hold,
// and what runs out beyond it: its memory, when the group's guests have a
// memory size (beside the fixed groups'), its CPUs, when they have a CPU
// limit, or the PCI devices network.passthrough lists, when its VMs each
// take one (beside the fixed groups' on that path). The reason is empty
// when none bounds it; a limit below 1 with a reason means not even one
// guest fits.
func HostLimit(spec *scenario.Spec, group scenario.GuestGroup, host scenario.Host) (int, string) {
	limit, reason := 0, ""
	if mem := group.MemoryBytes; mem > 0 {
		free := host.MemoryBytes
		for _, g := range spec.Guests {
			if g.Name != group.Name {
				free -= int64(g.Count) * g.MemoryBytes
			}
		}
		limit = int(max(free, 0) / mem)
		reason = fmt.Sprintf("memory: %d guests of %d MiB fit in the host's %d MiB", limit, mem>>20, host.MemoryBytes>>20)
	}
	if cpu := group.CPULimit; cpu > 0 {
		n := int(math.Floor(float64(len(host.CPUs))/cpu + 1e-9))
		if limit == 0 || n < limit {
			limit = n
			reason = fmt.Sprintf("CPU: %d guests limited to %.2g CPUs each fill the host's %d", n, cpu, len(host.CPUs))
		}
	}
	if lendsDevice(group) && spec.Network != nil {
		n := len(spec.Network.Passthrough)
		for _, g := range spec.Guests {
			if g.Name != group.Name && lendsDevice(g) {
				n -= g.Count
			}
		}
		n = max(n, 0)
		if reason == "" || n < limit {
			limit = n
			reason = fmt.Sprintf("devices: %d VMs take the %d PCI devices network.passthrough lists beside the other groups' on the %s path, one each",
				n, len(spec.Network.Passthrough), netpath.Passthrough)
		}
	}
	return limit, reason
}
