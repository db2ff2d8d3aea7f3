package stats

import (
	"math"
	"testing"
)

func TestPermutationExactSmallSamples(t *testing.T) {
	// Completely separated groups of 3: only the observed split and its
	// mirror are as extreme, 2 of the C(6,3)=20 splits.
	if p := PermutationTest([]float64{1, 2, 3}, []float64{10, 11, 12}, 0, 1); !near(p, 0.1, 1e-12) {
		t.Fatalf("p = %v, want 0.1", p)
	}
	// 5 a side, separated: 2/252.
	p := PermutationTest([]float64{1, 2, 3, 4, 5}, []float64{10, 11, 12, 13, 14}, 0, 1)
	if !near(p, 2.0/252, 1e-12) || p >= 0.01 {
		t.Fatalf("p = %v, want 2/252 < 0.01", p)
	}
	// Identical samples: every split is as extreme.
	if p := PermutationTest([]float64{5, 5, 5}, []float64{5, 5, 5}, 0, 1); p != 1 {
		t.Fatalf("identical samples: p = %v, want 1", p)
	}
	if p := PermutationTest(nil, []float64{1}, 0, 1); p != 1 {
		t.Fatalf("empty sample: p = %v", p)
	}
}

func TestPermutationMonteCarloIsReproducibleAndSane(t *testing.T) {
	a := make([]float64, 20)
	b := make([]float64, 20)
	for i := range a {
		a[i] = 100 + float64(i%5)
		b[i] = 100 + float64(i%5)
	}
	p1 := PermutationTest(a, b, 5000, 42)
	if p1 < 0.5 || p1 != PermutationTest(a, b, 5000, 42) {
		t.Fatalf("same distributions: p = %v (must be large and reproducible)", p1)
	}
	for i := range b {
		b[i] += 3
	}
	if p := PermutationTest(a, b, 5000, 42); p > 0.001 {
		t.Fatalf("shifted distribution: p = %v", p)
	}
}

func TestOverheadIndex(t *testing.T) {
	terms := []IndexTerm{
		// cpu: 10% slower.
		{Workload: "cpu", Guest: []float64{90, 90, 90}, Base: []float64{100, 100, 100}},
		// fio: two metrics, one 10% better throughput, one 10% worse latency:
		// they cancel within the workload.
		{Workload: "fio", Guest: []float64{110, 110}, Base: []float64{100, 100}},
		{Workload: "fio", Guest: []float64{110, 110}, Base: []float64{100, 100}, LowerIsBetter: true},
	}
	e := OverheadIndex(terms, 0.95, 500, 7)
	want := math.Sqrt(0.9 * math.Sqrt(1.1/1.1))
	if !near(e.Value, want, 1e-12) {
		t.Fatalf("index = %v, want %v", e.Value, want)
	}
	if e.Low != e.Value || e.High != e.Value {
		t.Fatalf("noise-free data must give a zero-width interval: %+v", e)
	}
	noisy := []IndexTerm{{Workload: "cpu", Guest: []float64{85, 90, 95, 92}, Base: []float64{98, 100, 102, 101}}}
	n := OverheadIndex(noisy, 0.95, 2000, 7)
	if !(n.Low < n.Value && n.Value < n.High && n.High < 1) {
		t.Fatalf("noisy index = %+v, want an interval around the value, below 1", n)
	}
	if e := OverheadIndex(nil, 0.95, 10, 1); !math.IsNaN(e.Value) {
		t.Fatalf("no terms: %+v", e)
	}
}

func TestMinRepetitions(t *testing.T) {
	for alpha, want := range map[float64]int{0.01: 5, 0.05: 4, 0.2: 3} {
		if got := MinRepetitions(alpha); got != want {
			t.Errorf("MinRepetitions(%v) = %d, want %d", alpha, got, want)
		}
	}
}
