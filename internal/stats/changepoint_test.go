package stats

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// noisy returns n values of level plus uniform noise in ±1, the same each
// time for one seed.
func noisy(rng *rand.Rand, n int, level float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = level + 2*rng.Float64() - 1
	}
	return out
}

func indexes(cps []ChangePoint) []int {
	out := []int{}
	for _, c := range cps {
		out = append(out, c.Index)
	}
	return out
}

func TestChangePointsFindsAStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	series := append(noisy(rng, 12, 100), noisy(rng, 9, 110)...)
	cps := ChangePoints(series, DefaultChangePointOptions)
	if got := indexes(cps); !reflect.DeepEqual(got, []int{12}) {
		t.Fatalf("change points at %v, want [12]: %+v", got, cps)
	}
	if cps[0].P >= DefaultChangePointOptions.Alpha {
		t.Fatalf("p = %v, not below alpha", cps[0].P)
	}
	if again := ChangePoints(series, DefaultChangePointOptions); !reflect.DeepEqual(again, cps) {
		t.Fatalf("not deterministic: %+v then %+v", cps, again)
	}
}

func TestChangePointsFlatSeriesHasNone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for seed := range 5 {
		series := noisy(rng, 30, 50)
		o := DefaultChangePointOptions
		o.Seed = uint64(seed + 1)
		if cps := ChangePoints(series, o); len(cps) != 0 {
			t.Errorf("series %d: change points %+v in noise around one level", seed, cps)
		}
	}
}

func TestChangePointsFindsTwoSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	series := append(append(noisy(rng, 10, 100), noisy(rng, 8, 90)...), noisy(rng, 10, 104)...)
	if got := indexes(ChangePoints(series, DefaultChangePointOptions)); !reflect.DeepEqual(got, []int{10, 18}) {
		t.Fatalf("change points at %v, want [10 18]", got)
	}
}

// TestChangePointsNeedsMinSizeEachSide: a step in the last value of a
// series cannot be told from an outlier yet, and a series too short to
// split has none.
func TestChangePointsNeedsMinSizeEachSide(t *testing.T) {
	if cps := ChangePoints([]float64{1, 1.1, 0.9, 1, 1.05, 9}, DefaultChangePointOptions); len(cps) != 0 {
		t.Fatalf("a last outlier made change points %+v", cps)
	}
	if cps := ChangePoints([]float64{1, 9}, DefaultChangePointOptions); len(cps) != 0 {
		t.Fatalf("two values made change points %+v", cps)
	}
	if cps := ChangePoints(nil, DefaultChangePointOptions); len(cps) != 0 {
		t.Fatalf("no values made change points %+v", cps)
	}
}

// TestBestSplitMatchesTheDefinition holds the incremental scan to the
// statistic computed from its definition at every split.
func TestBestSplitMatchesTheDefinition(t *testing.T) {
	x := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	direct := func(tau int) float64 {
		l, r := x[:tau], x[tau:]
		mean := func(a, b []float64, same bool) float64 {
			s, n := 0.0, 0
			for i := range a {
				for j := range b {
					if same && j <= i {
						continue
					}
					s += math.Abs(a[i] - b[j])
					n++
				}
			}
			return s / float64(n)
		}
		nl, nr, n := float64(len(l)), float64(len(r)), float64(len(x))
		return nl * nr / n * (2*mean(l, r, false) - mean(l, l, true) - mean(r, r, true))
	}
	wantTau, wantQ := 0, math.Inf(-1)
	for tau := 2; tau <= len(x)-2; tau++ {
		if q := direct(tau); q > wantQ {
			wantTau, wantQ = tau, q
		}
	}
	tau, q := bestSplit(x, 2)
	if tau != wantTau || math.Abs(q-wantQ) > 1e-9 {
		t.Fatalf("bestSplit = %d, %v; the definition gives %d, %v", tau, q, wantTau, wantQ)
	}
}

// TestChangePointsShortSeries pins what the docs promise of short
// series: 6 runs cannot show a step (p is at least 2/20), 8 can.
func TestChangePointsShortSeries(t *testing.T) {
	if cps := ChangePoints([]float64{10, 10.2, 9.9, 12, 12.1, 11.9}, DefaultChangePointOptions); len(cps) != 0 {
		t.Errorf("6 runs: change points %+v", cps)
	}
	cps := ChangePoints([]float64{10, 10.2, 9.9, 10.1, 12, 12.1, 11.9, 12.2}, DefaultChangePointOptions)
	if got := indexes(cps); !reflect.DeepEqual(got, []int{4}) {
		t.Errorf("8 runs: change points at %v, want [4]", got)
	}
}

// TestChangePointsOneStepFalseSecond: after a series with one real step is
// cut there, the next candidate is the best of two segments, so its null
// must be too; tested against one segment's shuffles it finds a second,
// false change point in about twice as many series as alpha allows.
func TestChangePointsOneStepFalseSecond(t *testing.T) {
	const series = 1000
	o := DefaultChangePointOptions
	rng := rand.New(rand.NewPCG(5, 5))
	first, second := 0, 0
	for i := range series {
		values := append(noisy(rng, 15, 100), noisy(rng, 15, 110)...)
		o.Seed = uint64(i + 1)
		cps := ChangePoints(values, o)
		if len(cps) > 0 {
			first++
		}
		if len(cps) > 1 {
			second++
		}
	}
	t.Logf("%d of %d series found the step, %d a second change point", first, series, second)
	if first != series {
		t.Errorf("the step was found in %d of %d series", first, series)
	}
	if limit := series * 7 / 100; second > limit {
		t.Errorf("%d of %d series with one step had a second change point, want at most %d (alpha %v)",
			second, series, limit, o.Alpha)
	}
}
