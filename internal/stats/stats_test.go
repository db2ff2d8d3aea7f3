package stats

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestSummarizeKnownValues(t *testing.T) {
	s := Summarize([]float64{4, 2, 6, 8}, 0.95)
	if s.N != 4 || s.Mean != 5 || s.Median != 5 || s.Min != 2 || s.Max != 8 {
		t.Fatalf("summary = %+v", s)
	}
	// Sample stddev of 2,4,6,8 is sqrt(20/3); t(0.975, 3) = 3.182446.
	sd := math.Sqrt(20.0 / 3)
	if !near(s.Stddev, sd, 1e-12) {
		t.Errorf("stddev = %v, want %v", s.Stddev, sd)
	}
	half := 3.182446305 * sd / 2
	if !near(s.CILow, 5-half, 1e-6) || !near(s.CIHigh, 5+half, 1e-6) {
		t.Errorf("CI = [%v, %v], want 5±%v", s.CILow, s.CIHigh, half)
	}
	if !near(s.RelativeHalfWidth(), half/5, 1e-6) {
		t.Errorf("relative half width = %v", s.RelativeHalfWidth())
	}
}

func TestSummarizeEdgeCases(t *testing.T) {
	if s := Summarize(nil, 0.95); s.N != 0 {
		t.Fatalf("empty: %+v", s)
	}
	one := Summarize([]float64{3}, 0.95)
	if one.Stddev != 0 || one.CILow != 3 || one.CIHigh != 3 || one.Median != 3 {
		t.Fatalf("single value: %+v", one)
	}
	odd := Summarize([]float64{9, 1, 5}, 0.95)
	if odd.Median != 5 {
		t.Fatalf("median of odd count = %v", odd.Median)
	}
	in := []float64{3, 1, 2}
	Summarize(in, 0.95)
	if in[0] != 3 {
		t.Fatal("Summarize reordered its input")
	}
}

func TestWiderConfidenceGivesWiderInterval(t *testing.T) {
	v := []float64{10, 11, 9, 10.5, 9.5}
	a, b := Summarize(v, 0.90), Summarize(v, 0.99)
	if !(b.CIHigh-b.CILow > a.CIHigh-a.CILow) {
		t.Fatalf("99%% interval %v not wider than 90%% %v", b.CIHigh-b.CILow, a.CIHigh-a.CILow)
	}
}

func TestNormalize(t *testing.T) {
	base := Summarize([]float64{100, 100, 100}, 0.95)
	guest := Summarize([]float64{77, 77, 77}, 0.95)
	n := Normalize(guest, base)
	if !near(n.Ratio, 0.77, 1e-12) || n.CILow != n.Ratio || n.CIHigh != n.Ratio {
		t.Fatalf("noise-free ratio = %+v", n)
	}
	noisy := Normalize(Summarize([]float64{70, 80, 90}, 0.95), Summarize([]float64{95, 100, 105}, 0.95))
	if !(noisy.CILow < 0.8 && noisy.CIHigh > 0.8) || !near(noisy.Ratio, 0.8, 1e-12) {
		t.Fatalf("noisy ratio = %+v", noisy)
	}
	if z := Normalize(guest, Summary{}); !math.IsNaN(z.Ratio) {
		t.Fatalf("zero baseline must give NaN, got %+v", z)
	}
}
