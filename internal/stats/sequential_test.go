package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// The boundaries hold what they promise: Brownian paths under the null,
// looked at with unequal increments of information, cross at each look
// as often as the spending allows there, and the first look is the
// normal quantile of its share.
func TestGroupSequentialSpendsAsPlanned(t *testing.T) {
	info := []float64{1, 1.5, 3, 4, 6}
	const alpha = 0.1
	levels := groupSequential(alpha, info)
	if want := spent(alpha, info[0]/6); math.Abs(levels[0]-want) > 1e-12 {
		t.Errorf("first look: %v, want %v", levels[0], want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const paths = 400000
	crossed := make([]int, len(info))
	for range paths {
		s, prev := 0.0, 0.0
		for k, ik := range info {
			s += rng.NormFloat64() * math.Sqrt(ik-prev)
			prev = ik
			if z := math.Abs(s) / math.Sqrt(ik); z >= distuv.UnitNormal.Quantile(1-levels[k]/2) {
				crossed[k]++
				break
			}
		}
	}
	before := 0.0
	for k, ik := range info {
		want := spent(alpha, ik/6) - before
		before += want
		got := float64(crossed[k]) / paths
		// Four standard errors of a binomial share.
		if tol := 4 * math.Sqrt(want*(1-want)/paths); math.Abs(got-want) > tol {
			t.Errorf("look %d: crossed in %.5f of paths, want %.5f ± %.5f", k+1, got, want, tol)
		}
	}
}

func reps(values ...float64) [][]float64 {
	out := make([][]float64, len(values))
	for i, v := range values {
		out[i] = []float64{v}
	}
	return out
}

var testPlan = Plan{Alpha: 0.01, Equivalence: 0.05, Floor: 0.05, MaxRepetitions: 40}

// The case: −7.4% [−12.8, −2.0] with 5 repetitions a side was
// called "no significant difference". An interval that reaches beyond the
// floor is not the same, and a p that has not reached the look's level is
// not a difference yet: undecided, with more repetitions to come.
func TestDecideUndecidedIsNotSame(t *testing.T) {
	a := reps(1000, 1040, 950, 1010, 990)
	b := reps(930, 990, 900, 960, 950)
	res := Decide(testPlan, []Metric{{A: a, B: b}})
	o := res.Metrics[0]
	if o.Decision != Undecided || !res.Continue || o.Needs <= 5 || o.Needs > 40 {
		t.Fatalf("%+v, continue %v", o, res.Continue)
	}
	if o.Look != 5 || o.Change > -0.04 || o.P > 0.1 || o.Level >= o.P {
		t.Errorf("outcome at the last look: %+v", o)
	}
	// At the last look nothing more can be measured.
	short := testPlan
	short.MaxRepetitions = 5
	if res := Decide(short, []Metric{{A: a, B: b}}); res.Continue || res.Metrics[0].Decision != Undecided {
		t.Errorf("max reached: %+v", res)
	}
}

func TestDecideSameWorseAndFamily(t *testing.T) {
	var a, same, worse [][]float64
	for i := range 12 {
		w := float64(i%3-1) * 5 // -5, 0, 5: a spread of 0.5%
		a = append(a, []float64{1000 + w})
		same = append(same, []float64{1003 - w})
		worse = append(worse, []float64{900 + w})
	}
	res := Decide(testPlan, []Metric{{A: a, B: same}, {A: a, B: worse}})
	if o := res.Metrics[0]; o.Decision != Same {
		t.Errorf("0.3%% at a spread of 0.5%%: %+v", o)
	}
	if o := res.Metrics[1]; o.Decision != Lower || o.Look >= 12 {
		t.Errorf("10%% lower: %+v", o)
	}
	if res.Continue {
		t.Error("all decided, yet continue")
	}
	// Decisions are final: what decided at a look stays decided whatever
	// the later repetitions say.
	decidedAt := res.Metrics[1].Look
	later := append(append([][]float64{}, worse[:decidedAt]...), reps(1000, 1000, 1000, 1000)...)
	if o := Decide(testPlan, []Metric{{A: a, B: same}, {A: a, B: later}}).Metrics[1]; o.Decision != Lower || o.Look != decidedAt {
		t.Errorf("a decision was undone by later repetitions: %+v", o)
	}
	// In a family of many metrics, Holm divides alpha among them: the
	// same evidence needs more repetitions.
	big := testPlan
	big.Family = 40
	if o := Decide(big, []Metric{{A: a, B: worse}}).Metrics[0]; o.Look <= decidedAt && o.Decision == Lower {
		t.Errorf("a family of 40 decided as early (%d) as a family of 2 (%d)", o.Look, decidedAt)
	}
}

// Against a baseline of 3 repetitions at a spread of 8%, no number of new
// ones resolves a 5% floor: the baseline's own error stays.
func TestDecideBaselineTooSmall(t *testing.T) {
	p := testPlan
	p.FixedA = true
	b := reps(1000, 1050, 950, 1000, 1040, 960)
	o := Decide(p, []Metric{{A: reps(1000, 1080, 920), B: b}}).Metrics[0]
	if o.Decision != Undecided || o.Needs != 0 {
		t.Errorf("%+v", o)
	}
	// A baseline of one value bounds no spread: never looked at, no
	// evidence of anything.
	if o := Decide(p, []Metric{{A: reps(1000), B: b}}).Metrics[0]; o.Decision != Undecided || o.P != 1 || o.Needs != 0 {
		t.Errorf("one value: %+v", o)
	}
}

// A metric with fewer repetitions than another is not looked at again
// until it grows: its verdict is the one it would have alone.
func TestDecideLooksOnlyAtNewValues(t *testing.T) {
	a := reps(1000, 1040, 950, 1010, 990)
	b := reps(930, 990, 900, 960, 950)
	var longA, longB [][]float64
	for i := range 40 {
		longA = append(longA, []float64{1000 + float64(i%2)})
		longB = append(longB, []float64{1000 + float64(i%3)})
	}
	alone := Decide(Plan{Alpha: 0.01, Equivalence: 0.05, Floor: 0.05, MaxRepetitions: 40, Family: 2}, []Metric{{A: a, B: b}}).Metrics[0]
	with := Decide(Plan{Alpha: 0.01, Equivalence: 0.05, Floor: 0.05, MaxRepetitions: 40}, []Metric{{A: a, B: b}, {A: longA, B: longB}}).Metrics[0]
	if alone != with {
		t.Errorf("alone %+v, beside a longer metric %+v", alone, with)
	}
}

func TestBaselineRepetitions(t *testing.T) {
	p := Plan{Alpha: 0.01, Floor: 0.05, MaxRepetitions: 40, Family: 20}
	quiet, noisy := BaselineRepetitions(p, 0.02, 1), BaselineRepetitions(p, 0.05, 1)
	if quiet < FirstLook || quiet > 10 || noisy <= quiet || noisy > 60 {
		t.Errorf("cv 2%%: %d, cv 5%%: %d", quiet, noisy)
	}
	// Two guests give two values a repetition.
	if two := BaselineRepetitions(p, 0.05, 2); two >= noisy {
		t.Errorf("2 values a repetition need %d, not fewer than 1 value's %d", two, noisy)
	}
	// At 10% noise, 40 repetitions of a run cannot find 5% whatever the
	// baseline.
	if none := BaselineRepetitions(p, 0.10, 1); none != 0 {
		t.Errorf("cv 10%%: %d, want none", none)
	}
}

// Against a fixed baseline, looked at from a run's 2nd repetition to its
// 40th, an unchanged metric is called changed no more often than alpha:
// whether the run is as noisy as the baseline or quieter. Welch's test
// with Welch–Satterthwaite's degrees of freedom failed the first (10% at
// a 5% level: the run's first looks have 2 or 3 values, and when they lie
// close, its degrees of freedom come from the baseline), Student's pooled
// test the second (39%: it lends the quiet run's variance to the small
// noisy baseline).
func TestDecideBaselineFalseAlarms(t *testing.T) {
	// No floor: nothing is ever the same, every metric is looked at to
	// the end.
	plan := Plan{Alpha: 0.05, Equivalence: 0.05, Floor: 0, MaxRepetitions: 40, FixedA: true}
	for _, tc := range []struct {
		baseline int
		sdB      float64 // the baseline's is 50
	}{{36, 50}, {5, 10}} {
		rng := rand.New(rand.NewPCG(3, 4))
		const runs = 4000
		changed := 0
		for range runs {
			m := Metric{A: make([][]float64, tc.baseline), B: make([][]float64, 40)}
			for r := range m.A {
				m.A[r] = []float64{1000 + 50*rng.NormFloat64()}
			}
			for r := range m.B {
				m.B[r] = []float64{1000 + tc.sdB*rng.NormFloat64()}
			}
			if d := Decide(plan, []Metric{m}).Metrics[0].Decision; d == Higher || d == Lower {
				changed++
			}
		}
		// Four standard errors above alpha.
		if rate := float64(changed) / runs; rate > 0.05+4*math.Sqrt(0.05*0.95/runs) {
			t.Errorf("%+v: %.2f%% of unchanged metrics called changed at alpha 5%%", tc, 100*rate)
		}
	}
}

// Against a baseline, a metric of few baseline repetitions has boundaries
// of its own, more lenient early than those of one of many: the look at
// which it is decided does not depend on which metric comes first.
func TestDecideEachMetricByItsOwnBoundaries(t *testing.T) {
	p := Plan{Alpha: 0.01, Equivalence: 0.05, Floor: 0.05, MaxRepetitions: 40, FixedA: true, Family: 2}
	var many [][]float64
	for i := range 40 {
		many = append(many, []float64{1000 + float64(i%5)*20})
	}
	quiet := Metric{A: many, B: reps(1000, 1040, 1020, 1060, 1010, 1030)}
	slower := Metric{A: reps(1000, 1001, 999), B: reps(800, 801, 799, 800, 800, 801)}
	alone := Decide(p, []Metric{slower}).Metrics[0]
	after := Decide(p, []Metric{quiet, slower}).Metrics[1]
	if alone.Decision != Lower || after.Decision != Lower || alone.Look != after.Look {
		t.Errorf("alone %+v, after another metric %+v", alone, after)
	}
}

// LookLevels spends alpha over equal looks: one look has all of it, and
// of three the first has a ninth, as α·t² gives, and none reaches alpha.
func TestLookLevels(t *testing.T) {
	if got := LookLevels(0.05, 1); len(got) != 1 || math.Abs(got[0]-0.05) > 1e-12 {
		t.Errorf("one look: %v, want [0.05]", got)
	}
	got := LookLevels(0.05, 3)
	if len(got) != 3 || math.Abs(got[0]-0.05/9) > 1e-12 {
		t.Fatalf("three looks: %v, want the first at %v", got, 0.05/9)
	}
	for k, l := range got {
		if !(l > 0 && l < 0.05) || k > 0 && !(l > got[k-1]) {
			t.Errorf("three looks: %v, want rising levels below 0.05", got)
		}
	}
}
