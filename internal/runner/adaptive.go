package runner

import (
	"context"
	"fmt"
	"math"

	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// headlineKey names one group's results of one workload entry.
type headlineKey struct{ group, workloadID string }

// noteHeadline keeps the value of the step's headline metric: the first
// sample its workload reports (events/s, IOPS, the median round trip, the
// throughput), the figure an adaptive run makes precise. Tails and
// extremes are left alone on purpose: a maximum never settles.
func (r *run) noteHeadline(st scenario.Step, parsed []workload.Sample) {
	if r.plan.Spec.Adaptive == nil || len(parsed) == 0 || math.IsNaN(parsed[0].Value) || math.IsInf(parsed[0].Value, 0) {
		return
	}
	if r.headlines == nil {
		r.headlines = map[headlineKey][]float64{}
	}
	k := headlineKey{st.Group, st.WorkloadID}
	r.headlines[k] = append(r.headlines[k], parsed[0].Value)
}

// extendIfImprecise is called after step i. When it ends a round of its
// workload in its phase (every guest of the phase did that repetition)
// and some group's headline is still less precise than the scenario's
// target (until the scenario's maximum number of repetitions), or
// Options.MoreRounds asks for another, it inserts another round of the
// phase right after: the guests of other phases are not running.
func (r *run) extendIfImprecise(ctx context.Context, i int, progress Progress) {
	st, done, ok := r.roundEnd(i)
	if !ok {
		return
	}
	why := r.imprecise(st.WorkloadID, done)
	if why == "" && r.opts.MoreRounds != nil {
		why = r.opts.MoreRounds(ctx, r.id, st.WorkloadID, done)
	}
	if why != "" {
		r.addRound(i, why, progress)
	}
}

// extendPairIfUndecided is called in an A/B run once step i of both runs
// is done. When it ends a round of the same workload in both (plans
// alike) and Options.MoreRoundsAB asks for another, both runs get one
// right after, so that their rounds stay interleaved.
func extendPairIfUndecided(ctx context.Context, runs []*run, i, phase int, progress Progress) {
	if len(runs) != 2 || runs[0].opts.MoreRoundsAB == nil {
		return
	}
	a, doneA, okA := runs[0].roundEnd(i)
	b, doneB, okB := runs[1].roundEnd(i)
	if !okA || !okB || a.Phase != phase || b.Phase != phase || a.WorkloadID != b.WorkloadID || doneA != doneB {
		return
	}
	why := runs[0].opts.MoreRoundsAB(ctx, [2]int64{runs[0].id, runs[1].id}, a.WorkloadID, doneA)
	if why == "" {
		return
	}
	for _, r := range runs {
		r.addRound(i, why, progress)
	}
}

// roundEnd returns step i and the rounds of its workload done when it
// ends the last round so far of that workload in its phase.
func (r *run) roundEnd(i int) (scenario.Step, int, bool) {
	steps := r.plan.Steps
	if i >= len(steps) {
		return scenario.Step{}, 0, false
	}
	st := steps[i]
	if st.Warmup || (i+1 < len(steps) && steps[i+1].WorkloadID == st.WorkloadID && steps[i+1].Phase == st.Phase) {
		return scenario.Step{}, 0, false
	}
	return st, st.Repetition + 1, true
}

// addRound inserts another round of step i's workload in its phase right
// after it.
func (r *run) addRound(i int, why string, progress Progress) {
	steps := r.plan.Steps
	st := steps[i]
	done := st.Repetition + 1
	var round []scenario.Step
	for _, s := range steps {
		if s.WorkloadID == st.WorkloadID && s.Phase == st.Phase && !s.Warmup && s.Repetition == st.Repetition {
			next := s
			next.Repetition = done
			round = append(round, next)
		}
	}
	r.plan.Steps = append(steps[:i+1:i+1], append(round, steps[i+1:]...)...)
	progress.Logf("%s%s: %s after %d repetitions: one more (%d steps)", r.label, st.WorkloadID, why, done, len(round))
}

// imprecise says why the scenario's adaptive target wants another round
// of the workload after done repetitions, or "".
func (r *run) imprecise(workloadID string, done int) string {
	a := r.plan.Spec.Adaptive
	if a == nil || done >= a.MaxRepetitions {
		return ""
	}
	group, width := r.widestInterval(workloadID)
	if width <= a.Target {
		return ""
	}
	return fmt.Sprintf("±%.1f%% in %s, above the %.1f%% target,", 100*width, group, 100*a.Target)
}

// widestInterval returns the group whose headline of the workload has the
// widest 95% interval relative to its mean, and that width; +Inf when a
// group has too few values to bound its mean. Groups without any value
// (every step failed) are left out: repeating cannot help them.
func (r *run) widestInterval(workloadID string) (string, float64) {
	worst, width := "", 0.0
	for k, values := range r.headlines {
		if k.workloadID != workloadID {
			continue
		}
		w := math.Inf(1)
		if len(values) >= 2 {
			s := stats.Summarize(values, 0.95)
			if s.Mean == 0 {
				continue
			}
			w = (s.CIHigh - s.Mean) / math.Abs(s.Mean)
		}
		if w > width || worst == "" {
			worst, width = k.group, w
		}
	}
	return worst, width
}
