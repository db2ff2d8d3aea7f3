package stats

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Five equally spaced looks of the O'Brien-Fleming-type spending function
// at two-sided 0.05: the critical values every group-sequential text
// tabulates for it (Jennison & Turnbull 2000, ch. 7): 4.877, 3.357, 2.680,
// 2.290, 2.031.
func TestGroupSequentialMatchesPublishedBoundaries(t *testing.T) {
	levels := groupSequential(0.05, []float64{1, 2, 3, 4, 5})
	for k, want := range []float64{4.877, 3.357, 2.680, 2.290, 2.031} {
		if got := distuv.UnitNormal.Quantile(1 - levels[k]/2); math.Abs(got-want) > 0.01 {
			t.Errorf("look %d: critical value %.3f, want %.3f", k+1, got, want)
		}
	}
	if one := groupSequential(0.05, []float64{3}); math.Abs(one[0]-0.05) > 1e-12 {
		t.Errorf("a single look spends the whole alpha: %v", one)
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
	if o.Look != 5 || o.Change > -0.04 || o.P > 0.05 || o.Level >= o.P {
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
}
