package report

import (
	"fmt"
	"io"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// Shortfall is a metric a baseline has too few repetitions of to be
// decided against at the noise it measured.
type Shortfall struct {
	Group, WorkloadID, Params, Metric string
	CV                                float64
	Repetitions, Values               int
	// Needs is the repetitions the baseline would need; 0 when none would
	// do: a run of the most repetitions allowed is itself too few.
	Needs int
}

// BaselineShortfalls lists the metrics of a baseline's samples against
// which a run of o.MaxRepetitions would likely miss a change at the noise
// floor (stats.BaselineRepetitions), the family being all its metrics,
// and how many metrics it has.
func BaselineShortfalls(samples []store.Sample, o CompareOptions) (out []Shortfall, metrics int) {
	return BaselineShortfallsAmong(samples, o, 0)
}

// BaselineShortfallsAmong is BaselineShortfalls for a baseline that will
// have family metrics, of which samples hold some so far: a baseline
// still being measured.
func BaselineShortfallsAmong(samples []store.Sample, o CompareOptions, family int) (out []Shortfall, metrics int) {
	c := CompareRuns(store.Run{}, samples, store.Run{}, nil, o)
	plan := o.plan(max(family, len(c.Rows)))
	for _, r := range c.Rows {
		needs := stats.BaselineRepetitions(plan, r.CVA, float64(r.A.N)/float64(max(r.RepetitionsA, 1)))
		if needs != 0 && needs <= r.RepetitionsA {
			continue
		}
		out = append(out, Shortfall{Group: r.Group, WorkloadID: r.WorkloadID, Params: r.Params, Metric: r.Metric,
			CV: r.CVA, Repetitions: r.RepetitionsA, Values: r.A.N, Needs: needs})
	}
	return out, len(c.Rows)
}

// WriteShortfalls says plainly which metrics of baseline run id cannot be
// decided against, and what would do.
func WriteShortfalls(w io.Writer, id int64, metrics int, s []Shortfall, o CompareOptions) error {
	sw := &stickyWriter{w: w}
	fmt.Fprintf(sw, "baseline run %d is too small for %d of its %d metrics: against it a run of up to %d repetitions would likely miss a %.3g%% change at the noise it measured\n",
		id, len(s), metrics, o.MaxRepetitions, 100*o.NoiseFloor)
	for _, m := range s {
		name := fmt.Sprintf("%s %s %s", m.Group, m.WorkloadID, m.Metric)
		if m.Params != "" {
			name += " (" + m.Params + ")"
		}
		need := fmt.Sprintf("needs %d repetitions", m.Needs)
		if m.Needs == 0 {
			need = fmt.Sprintf("too noisy for any baseline at %d repetitions of a run: lower its noise", o.MaxRepetitions)
		}
		noise := fmt.Sprintf("cv %.2g%%", 100*m.CV)
		if m.Values < 2 {
			noise = "one value, no spread"
		}
		fmt.Fprintf(sw, "  %s: %s, %d repetitions, %s\n", name, noise, m.Repetitions, need)
	}
	return sw.err
}
