package stats

import (
	"math"
	"slices"
	"sort"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// Plan is how a comparison of many metrics between A and B is decided as
// repetitions come: each round of repetitions is a look, and the looks go
// on while a metric is undecided, up to MaxRepetitions.
type Plan struct {
	// Alpha bounds the chance that a comparison calls any unchanged metric
	// of its family changed, over every look: family-wise, per comparison.
	Alpha float64
	// Equivalence bounds the chance that a metric whose change is at the
	// floor is called the same, over every look.
	Equivalence float64
	// Floor is the relative change (0.05 = 5%) within which a change does
	// not matter.
	Floor float64
	// MaxRepetitions is the last look: repetitions of the side(s) that grow.
	MaxRepetitions int
	// FixedA: A is a baseline, whose repetitions are all there from the
	// first look and never grow; only B's do.
	FixedA bool
	// Family is how many metrics the family holds, at least the metrics
	// passed: those of A that B has not measured yet count too, so that a
	// decision taken while a run goes on holds once the rest is measured.
	Family int
}

// FirstLook is the repetitions of the growing side at the first look: a
// variance needs two.
const FirstLook = 2

// Decision is a metric's verdict.
type Decision int

// Decisions: Higher and Lower say which way B moved, significant at the
// plan's level and not within the floor; Same says B's change lies
// within ±floor (its equivalence test passed); Undecided, neither yet.
const (
	Undecided Decision = iota
	Same
	Higher
	Lower
)

// Metric is one metric's values on each side, by repetition: A[r] holds
// what repetition r gave (one value a guest of the group).
type Metric struct{ A, B [][]float64 }

// Outcome is one metric's decision and the look that took it.
type Outcome struct {
	Decision Decision
	// Look is the repetitions of the growing side at the look that decided
	// the metric, or at the last look for an undecided one.
	Look int
	// Change is B's mean relative to A's, minus 1, at that look.
	Change float64
	// P is the two-sided p-value of the t test at that look, and Level
	// the nominal level it had to be below there: the alpha spent at that
	// look, divided as Holm's procedure divides it among the metrics still
	// open.
	P, Level float64
	// Needs, for an undecided metric, is the repetitions of the growing
	// side that would likely decide it at the noise and change measured;
	// 0 when no number can (B against a baseline too small to resolve it).
	Needs int
}

// Result is the decision of every metric at the latest look.
type Result struct {
	Metrics []Outcome
	// Look is the repetitions of the growing side at the latest look.
	Look int
	// Continue: some metric is undecided and looks remain.
	Continue bool
}

// needsCap bounds the search for the repetitions that would decide a
// metric: beyond it, "none" is the useful answer.
const needsCap = 100000

// Decide replays the plan's looks over the repetitions given, from
// FirstLook to the latest, and returns each metric's decision: a metric
// decided at a look keeps its decision, so what was decided while a run
// went on is what its comparison says afterwards.
//
// At each look a metric still open is first tested for equivalence (two
// one-sided t tests against ±floor, Schuirmann 1987), then the open
// metrics' t tests of "no change" are taken in Holm's order. Both kinds
// of test spend their level over the looks (Lan & DeMets
// 1983, with the spending function of Kim & DeMets 1987, ρ = 2) through
// exact group-sequential boundaries; Holm's procedure at each look uses the
// boundaries of alpha/r for the r hypotheses not yet rejected, which
// keeps the family-wise error at alpha over looks and metrics (the
// group-sequential Holm procedure of Ye, Li, Liu & Yao 2013).
func Decide(p Plan, ms []Metric) Result {
	family := max(p.Family, len(ms))
	series := make([]prefix, len(ms))
	latest := 0
	for i, m := range ms {
		series[i] = newPrefix(m)
		latest = max(latest, series[i].latest(p.FixedA))
	}
	last := max(p.MaxRepetitions, latest, FirstLook)
	res := Result{Metrics: make([]Outcome, len(ms)), Look: latest}
	open := make([]bool, len(ms))
	for i := range open {
		open[i] = true
		// A metric never looked at (a side without two values) has no
		// evidence of a change.
		res.Metrics[i].P = 1
	}
	rejected := 0
	var snaps []snapshot
	for n := FirstLook; n <= latest; n++ {
		snaps = snaps[:0]
		for i := range ms {
			// A metric is looked at only when it has grown: looking again
			// at the same values would spend alpha on nothing new (a
			// workload measured fewer rounds than another so far).
			if !open[i] || n > series[i].latest(p.FixedA) {
				continue
			}
			s, ok := series[i].at(n, p.FixedA)
			if !ok {
				continue
			}
			s.metric = i
			s.fixedA = series[i].fixedA(p.FixedA)
			if s.equivalent(p, n, last) {
				s.pValue()
				res.Metrics[i] = s.outcome(n, Same, 0)
				open[i] = false
				continue
			}
			snaps = append(snaps, s)
		}
		if len(snaps) == 0 {
			continue
		}
		// Holm's first step is the strictest: when no open metric may
		// reach it, none is rejected at this look, and the exact p-values
		// can wait for each metric's last look.
		firstLevel := func(s snapshot) float64 {
			return lookLevels(p.Alpha/float64(family-rejected), s.fixedA, FirstLook, last)[n-FirstLook]
		}
		reachable := slices.ContainsFunc(snaps, func(s snapshot) bool { return s.mayReject(firstLevel(s)) })
		for i := range snaps {
			if !reachable && n < series[snaps[i].metric].latest(p.FixedA) {
				continue
			}
			snaps[i].pValue()
			// Every open metric shows the level it would have had to
			// reach first.
			res.Metrics[snaps[i].metric] = snaps[i].outcome(n, Undecided, firstLevel(snaps[i]))
		}
		if !reachable {
			continue
		}
		sort.SliceStable(snaps, func(i, j int) bool { return snaps[i].p < snaps[j].p })
		for _, s := range snaps {
			level := lookLevels(p.Alpha/float64(family-rejected), s.fixedA, FirstLook, last)[n-FirstLook]
			if !(s.p < level) {
				break
			}
			d := Higher
			if s.diff < 0 {
				d = Lower
			}
			res.Metrics[s.metric] = s.outcome(n, d, level)
			open[s.metric] = false
			rejected++
		}
	}
	for i := range ms {
		if !open[i] {
			continue
		}
		o := &res.Metrics[i]
		o.Needs = series[i].needs(p, family-rejected, o.Change)
		res.Continue = res.Continue || latest < last
	}
	return res
}

// prefix keeps running sums by repetition, so that every look of a replay
// costs the same whatever its size. Values are taken relative to the
// first of A, which keeps the sums of squares exact for metrics whose
// spread is small beside their mean.
type prefix struct {
	shift float64
	a, b  []moments // a[r]: the moments of repetitions 0..r-1
}

type moments struct{ n, sum, sq float64 }

func newPrefix(m Metric) prefix {
	var p prefix
	for _, r := range m.A {
		if len(r) > 0 {
			p.shift = r[0]
			break
		}
	}
	build := func(reps [][]float64) []moments {
		out := make([]moments, len(reps)+1)
		for i, r := range reps {
			out[i+1] = out[i]
			for _, v := range r {
				x := v - p.shift
				out[i+1].n++
				out[i+1].sum += x
				out[i+1].sq += x * x
			}
		}
		return out
	}
	p.a, p.b = build(m.A), build(m.B)
	return p
}

// latest is the repetitions of the growing side(s) given.
func (p prefix) latest(fixedA bool) int {
	if fixedA {
		return len(p.b) - 1
	}
	return max(len(p.a), len(p.b)) - 1
}

// fixedA is the repetitions of A when it does not grow, 0 when it does.
func (p prefix) fixedA(fixed bool) int {
	if !fixed {
		return 0
	}
	return len(p.a) - 1
}

// snapshot is one metric at one look.
type snapshot struct {
	metric, fixedA int
	meanA, diff    float64
	varA, varB     float64 // per value
	nA, nB         float64 // values
	se, df, p      float64
}

func (m moments) mean() float64 { return m.sum / m.n }

func (m moments) variance() float64 {
	if m.n < 2 {
		return 0
	}
	return math.Max(0, (m.sq-m.sum*m.sum/m.n)/(m.n-1))
}

// at is the metric after n repetitions of the growing side(s); false
// when a side has fewer than two values, which bound no spread.
func (p prefix) at(n int, fixedA bool) (snapshot, bool) {
	ma := p.a[len(p.a)-1]
	if !fixedA {
		ma = p.a[min(n, len(p.a)-1)]
	}
	mb := p.b[min(n, len(p.b)-1)]
	if ma.n < 2 || mb.n < 2 {
		return snapshot{}, false
	}
	s := snapshot{meanA: ma.mean() + p.shift, diff: mb.mean() - ma.mean(), varA: ma.variance(), varB: mb.variance(), nA: ma.n, nB: mb.n}
	s.se, s.df = welch(s.varA, s.nA, s.varB, s.nB)
	return s, true
}

// pValue is the two-sided p of the t test, computed apart because
// most looks need only to know it is not small (mayReject).
func (s *snapshot) pValue() float64 {
	switch {
	case s.se > 0:
		s.p = 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: s.df}.Survival(math.Abs(s.diff)/s.se)
	case s.diff == 0:
		s.p = 1
	default:
		s.p = 0
	}
	return s.p
}

// mayReject is false when the test's p is surely not below level:
// Student's tail is never lighter than the normal's.
func (s snapshot) mayReject(level float64) bool {
	return s.se == 0 || math.Abs(s.diff)/s.se >= distuv.UnitNormal.Quantile(1-level/2)
}

// welch is the standard error of a difference of means from each side's
// own variance, and conservative degrees of freedom: min(nA, nB) − 1.
// Welch–Satterthwaite's estimate is liberal when a run's 2 or 3 values
// happen to lie close beside a baseline's dozens, and a pooled variance
// lends a quiet run's spread to a noisy baseline: both call unchanged
// metrics changed far beyond alpha (TestDecideBaselineFalseAlarms).
func welch(varA, nA, varB, nB float64) (se, df float64) {
	return math.Sqrt(varA/nA + varB/nB), math.Min(nA, nB) - 1
}

func (s snapshot) outcome(n int, d Decision, level float64) Outcome {
	return Outcome{Decision: d, Look: n, Change: s.diff / math.Abs(s.meanA), P: s.p, Level: level}
}

// equivalent is the two one-sided tests at look n: both reject a change
// of ±floor at the one-sided level the equivalence spending leaves this
// look, that is, the interval of that level lies within ±floor.
func (s snapshot) equivalent(p Plan, n, last int) bool {
	bound := p.Floor * math.Abs(s.meanA)
	if s.se == 0 {
		return math.Abs(s.diff) < bound || s.diff == 0
	}
	q := lookLevels(2*p.Equivalence, s.fixedA, FirstLook, last)[n-FirstLook] / 2
	// Student's quantile is never below the normal one: a change the
	// normal interval does not fit needs no more arithmetic.
	if math.Abs(s.diff)+distuv.UnitNormal.Quantile(1-q)*s.se >= bound {
		return false
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: s.df}.Survival((bound-math.Abs(s.diff))/s.se) < q
}

// needs is the repetitions of the growing side after which, at the
// spread measured and with the change as it stands, the interval would
// clear either zero at the level of one of open hypotheses or the floor
// at the equivalence level: the likely end of an undecided metric's
// looks. 0 when none would, as against a baseline whose own values are
// too few.
func (p prefix) needs(pl Plan, open int, change float64) int {
	if len(p.a) < 2 || len(p.b) < 2 || math.IsNaN(change) {
		return 0
	}
	ma, mb := p.a[len(p.a)-1], p.b[len(p.b)-1]
	if ma.n < 2 || mb.n < 2 {
		return 0
	}
	perA, perB := ma.n/float64(len(p.a)-1), mb.n/float64(len(p.b)-1)
	ls, le := pl.Alpha/float64(2*open), pl.Equivalence
	zs, ze := distuv.UnitNormal.Quantile(1-ls), distuv.UnitNormal.Quantile(1-le)
	d, mean := math.Abs(change), math.Abs(ma.mean()+p.shift)
	decides := func(nA, nB float64) bool {
		se, df := welch(ma.variance(), nA, mb.variance(), nB)
		se /= mean
		// Student's quantiles are never below the normal ones: what the
		// normal cannot decide needs no more arithmetic.
		if d <= zs*se && d+ze*se >= pl.Floor {
			return false
		}
		// Beyond a thousand degrees of freedom Student's quantiles are the
		// normal's to within 1%, closer than an estimate needs.
		if df > 1000 {
			return true
		}
		return d > studentQuantile(1-ls, df)*se || d+studentQuantile(1-le, df)*se < pl.Floor
	}
	// Against a baseline, B's part of the error vanishes as it grows and
	// the baseline's stays: what that cannot decide, nothing can.
	if pl.FixedA && !decides(ma.n, math.Inf(1)) {
		return 0
	}
	at := func(n int) bool {
		nA := ma.n
		if !pl.FixedA {
			nA = perA * float64(n)
		}
		return decides(nA, perB*float64(n))
	}
	// More repetitions only narrow the interval: the first size that
	// decides is found by bisection.
	lo, hi := len(p.b)-1, needsCap
	if !at(hi) {
		return 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if at(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

type quantileKey struct{ p, df float64 }

var quantiles sync.Map // quantileKey → float64

// studentQuantile is Student's quantile at p for df degrees of freedom
// rounded down (the larger quantile), remembered: the estimates of
// undecided metrics ask for the same few again and again.
func studentQuantile(p, df float64) float64 {
	k := quantileKey{p, math.Floor(df)}
	if q, ok := quantiles.Load(k); ok {
		return q.(float64)
	}
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: k.df}.Quantile(p)
	quantiles.Store(k, q)
	return q
}

// detectPower is the chance the sizing of a baseline aims at for a change
// at the floor, as the simulation's goal does.
const detectPower = 0.8

// BaselineRepetitions is the fewest repetitions a baseline needs, at a
// coefficient of variation cv per value and perRep values a repetition,
// for a run of the plan's MaxRepetitions to decide against it: a change
// at the floor found with detectPower even at the strictest of Holm's
// levels in a family of the plan's size, by the t test at the degrees of
// freedom the smaller side gives. 0 when no baseline of up to
// maxBaseline repetitions would do: the run's own values are too few at
// that noise. Against a baseline of n repetitions no number of new ones
// resolves a change smaller than the baseline's own uncertainty, so its
// size is fixed when it is set.
func BaselineRepetitions(p Plan, cv, perRep float64) int {
	if cv == 0 {
		return FirstLook
	}
	level := p.Alpha / float64(2*max(p.Family, 1))
	runValues := perRep * float64(p.MaxRepetitions)
	for n := FirstLook; n <= maxBaseline; n++ {
		values := perRep * float64(n)
		se := cv * math.Sqrt(1/values+1/runValues)
		df := math.Min(values, runValues) - 1
		// The normal quantiles are never above Student's: a size they
		// cannot reach needs no more arithmetic.
		if (distuv.UnitNormal.Quantile(1-level)+distuv.UnitNormal.Quantile(detectPower))*se > p.Floor {
			continue
		}
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
		if (t.Quantile(1-level)+t.Quantile(detectPower))*se <= p.Floor {
			return n
		}
	}
	return 0
}

// maxBaseline bounds the sizes BaselineRepetitions considers.
const maxBaseline = 1000
