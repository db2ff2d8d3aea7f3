package stats

import "testing"

func TestTailOfIsTheSetsOwnValues(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	got := TailOf(xs)
	if want := (Tail{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}); got != want {
		t.Errorf("1..100: %+v, want %+v", got, want)
	}
	if xs[0] != 100 {
		t.Error("the caller's values were sorted in place")
	}
	if got := TailOf([]float64{3}); got != (Tail{N: 1, P50: 3, P95: 3, P99: 3, Max: 3}) {
		t.Errorf("one value: %+v", got)
	}
	if got := TailOf(nil); got != (Tail{}) {
		t.Errorf("none: %+v", got)
	}
}
