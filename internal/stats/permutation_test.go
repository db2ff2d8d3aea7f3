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
		if got := MinRepetitions(alpha, 1, 1); got != want {
			t.Errorf("MinRepetitions(%v, 1, 1) = %d, want %d", alpha, got, want)
		}
	}
	// Two guests a side: 3 repetitions give 6 values a side, 2/C(12, 6)
	// < 0.01, where 2 give 4 a side, 2/C(8, 4) = 0.029.
	if got := MinRepetitions(0.01, 2, 2); got != 3 {
		t.Errorf("MinRepetitions(0.01, 2, 2) = %d, want 3", got)
	}
}

// Against 3 fixed values, 1/C(3+n, 3) < 0.01 first at n = 7 (1/120); a
// group of 2 guests gets there in 4 repetitions.
func TestMinRepetitionsAgainst(t *testing.T) {
	for _, tc := range []struct{ na, perB, want int }{{3, 1, 7}, {3, 2, 4}, {4, 2, 3}, {1, 1, 100}} {
		if got := MinRepetitionsAgainst(0.01, tc.na, tc.perB); got != tc.want {
			t.Errorf("MinRepetitionsAgainst(0.01, %d, %d) = %d, want %d", tc.na, tc.perB, got, tc.want)
		}
	}
}

// The floor must be what the test really gives fully separated samples:
// with unequal sizes the mirror split is no longer as extreme.
func TestSmallestPIsReached(t *testing.T) {
	for _, tc := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1, 2, 3}, []float64{10, 11, 12}, 0.1},
		{[]float64{1, 2, 3, 4, 5}, []float64{10, 11, 12, 13, 14}, 2.0 / 252},
		{[]float64{1, 2}, []float64{10, 11, 12}, 0.1},
		{[]float64{1, 2, 3}, []float64{10, 11, 12, 13}, 1.0 / 35},
	} {
		got := SmallestP(len(tc.a), len(tc.b))
		if !near(got, tc.want, 1e-12) {
			t.Errorf("SmallestP(%d, %d) = %v, want %v", len(tc.a), len(tc.b), got, tc.want)
		}
		if p := PermutationTest(tc.a, tc.b, 0, 1); !near(p, got, 1e-12) {
			t.Errorf("%v vs %v: the test gives %v, the floor says %v", tc.a, tc.b, p, got)
		}
	}
	if SmallestP(0, 3) != 1 {
		t.Error("an empty side can decide nothing")
	}
}
