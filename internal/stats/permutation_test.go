package stats

import "testing"

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

func TestMinRepetitions(t *testing.T) {
	for alpha, want := range map[float64]int{0.01: 5, 0.05: 4, 0.2: 3} {
		if got := MinRepetitions(alpha); got != want {
			t.Errorf("MinRepetitions(%v) = %d, want %d", alpha, got, want)
		}
	}
}
