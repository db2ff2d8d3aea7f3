package stats

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// exactQuantile is the nearest-rank quantile of sorted values, the
// definition Quantile approximates.
func exactQuantile(sorted []float64, q float64) float64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	if r < 1 {
		r = 1
	}
	return sorted[r-1]
}

func TestHistogramQuantilesWithinRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() float64{
		"uniform 10..20":   func() float64 { return 10 + 10*rng.Float64() },
		"exponential 15":   func() float64 { return 15 * rng.ExpFloat64() },
		"lognormal":        func() float64 { return math.Exp(2.7 + 0.5*rng.NormFloat64()) },
		"sub-unit 1e-3..1": func() float64 { return 1e-3 + rng.Float64() },
		"heavy tail":       func() float64 { return 10 / math.Pow(1-rng.Float64(), 1/1.5) },
		"large 1e6..1e9":   func() float64 { return math.Exp2(20 + 10*rng.Float64()) },
	}
	qs := []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1}
	for name, draw := range dists {
		t.Run(name, func(t *testing.T) {
			h := NewHistogram("us")
			vals := make([]float64, 100_000)
			for i := range vals {
				vals[i] = draw()
				h.Add(vals[i])
			}
			sort.Float64s(vals)
			// The documented bound is a bucket's width; reporting the
			// bucket's geometric middle halves it, and a regression to
			// reporting an edge must show.
			halfBucket := math.Exp2(1.0/128) - 1
			for _, q := range qs {
				want, got := exactQuantile(vals, q), h.Quantile(q)
				if rel := math.Abs(got-want) / want; rel > halfBucket || rel > HistogramRelError {
					t.Errorf("q=%v: got %v, want %v (relative error %.5f > %.5f)", q, got, want, rel, halfBucket)
				}
			}
			if h.Quantile(0) != vals[0] || h.Quantile(1) != vals[len(vals)-1] {
				t.Errorf("q=0,1 = %v, %v; want exact min %v and max %v", h.Quantile(0), h.Quantile(1), vals[0], vals[len(vals)-1])
			}
		})
	}
}

func TestHistogramExactMoments(t *testing.T) {
	h := NewHistogram("us")
	for _, v := range []float64{2, 4, 4, 4, 5, 5, 7, 9} {
		h.Add(v)
	}
	// Sample standard deviation of this classic set: sqrt(32/7).
	if h.Count() != 8 || h.Min() != 2 || h.Max() != 9 || h.Mean() != 5 || math.Abs(h.StdDev()-math.Sqrt(32.0/7)) > 1e-12 {
		t.Fatalf("count %d min %v max %v mean %v stddev %v", h.Count(), h.Min(), h.Max(), h.Mean(), h.StdDev())
	}
	// AddN is n Adds.
	g := NewHistogram("us")
	g.AddN(4, 3)
	g.AddN(5, 2)
	for _, v := range []float64{2, 7, 9} {
		g.Add(v)
	}
	g.AddN(100, 0)
	if !equalJSON(t, g, h) {
		t.Fatalf("AddN differs from Add:\n%s\n%s", mustJSON(t, g), mustJSON(t, h))
	}
}

func TestHistogramMedianOfAllEqual(t *testing.T) {
	h := NewHistogram("us")
	h.AddN(13.7, 1000)
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if got := h.Quantile(q); got != 13.7 {
			t.Errorf("Quantile(%v) = %v, want 13.7 (clamped to min = max)", q, got)
		}
	}
	if h.StdDev() > 1e-6 {
		t.Errorf("stddev of equal values = %v", h.StdDev())
	}
}

func TestHistogramMergeEqualsAddingAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, a, b := NewHistogram("us"), NewHistogram("us"), NewHistogram("us")
	for i := 0; i < 50_000; i++ {
		// Whole numbers keep Sum and SumSq exact whatever the order of
		// addition, so the two histograms must encode to the same bytes.
		v := float64(rng.IntN(5000))
		all.Add(v)
		if i%3 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	a.Add(math.NaN())
	all.Add(math.Inf(1))
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(t, a, all) {
		t.Fatalf("merge differs from adding all:\n%s\n%s", mustJSON(t, a), mustJSON(t, all))
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("q=%v: merged %v, all %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
	// Merging into an empty histogram copies; merging nil or an empty one
	// changes nothing.
	e := NewHistogram("us")
	if err := e.Merge(all); err != nil || !equalJSON(t, e, all) {
		t.Fatalf("merge into empty: %v", err)
	}
	if err := e.Merge(nil); err != nil || !equalJSON(t, e, all) {
		t.Fatalf("merge nil: %v", err)
	}
	if err := e.Merge(NewHistogram("us")); err != nil || !equalJSON(t, e, all) {
		t.Fatalf("merge empty: %v", err)
	}
}

func TestHistogramMergeWithItself(t *testing.T) {
	h, twice := NewHistogram("us"), NewHistogram("us")
	for _, v := range []float64{-1, 0, 3, 3, 8} {
		h.Add(v)
		twice.AddN(v, 2)
	}
	if err := h.Merge(h); err != nil || !equalJSON(t, h, twice) {
		t.Fatalf("h.Merge(h) = %v:\n%s\nwant\n%s", err, mustJSON(t, h), mustJSON(t, twice))
	}
}

func TestHistogramMergeDifferentUnitsFails(t *testing.T) {
	us, ns := NewHistogram("us"), NewHistogram("ns")
	us.Add(1)
	ns.Add(1000)
	err := us.Merge(ns)
	if !errors.Is(err, ErrHistogram) || !strings.Contains(err.Error(), `"ns"`) || !strings.Contains(err.Error(), `"us"`) {
		t.Fatalf("err = %v, want ErrHistogram naming both units", err)
	}
	if us.Count() != 1 || us.Max() != 1 {
		t.Fatalf("failed merge changed the histogram: count %d max %v", us.Count(), us.Max())
	}
}

func TestHistogramJSONRoundTrip(t *testing.T) {
	h := NewHistogram("us")
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 10_000; i++ {
		h.Add(15 * rng.ExpFloat64())
	}
	h.Add(0)
	h.Add(-2)
	h.Add(math.NaN())
	data := mustJSON(t, h)
	var back Histogram
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if again := mustJSON(t, &back); string(again) != string(data) {
		t.Fatalf("round trip changed the encoding:\n%s\n%s", data, again)
	}
	if back.Unit() != "us" || back.Count() != h.Count() || back.Invalid() != 1 || back.Min() != -2 ||
		back.Mean() != h.Mean() || back.StdDev() != h.StdDev() || back.Quantile(0.999) != h.Quantile(0.999) {
		t.Fatalf("round trip lost figures: %s", again(t, &back))
	}
	// A decoded histogram keeps accepting observations and merges.
	back.Add(1)
	if err := back.Merge(h); err != nil || back.Count() != 2*h.Count()+1 {
		t.Fatalf("after round trip: err %v count %d", err, back.Count())
	}
}

func again(t *testing.T, h *Histogram) string { return string(mustJSON(t, h)) }

func TestHistogramJSONShape(t *testing.T) {
	h := NewHistogram("us")
	h.Add(1)
	h.Add(2)
	h.Add(2)
	want := `{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]]}`
	if got := string(mustJSON(t, h)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// As a field of another value, through encoding/json.
	type wrap struct{ H *Histogram }
	b, err := json.Marshal(wrap{h})
	if err != nil || !strings.Contains(string(b), want) {
		t.Fatalf("embedded: %s, %v", b, err)
	}
}

func TestHistogramUnmarshalRejectsDamage(t *testing.T) {
	for _, bad := range []string{
		``,
		`{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]]`,
		`{"unit":"us","scale":32,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]]}`,
		`{"unit":"us","scale":64,"count":4,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]]}`,
		`{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[0,2]]}`,
		`{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,3],[64,0]]}`,
		`{"unit":"us","scale":64,"count":3,"min":3,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]]}`,
		`{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9}`,
		`{"unit":"us","scale":64,"count":3,"min":1,"max":2,"sum":5,"sumsq":9,"buckets":[[0,1],[64,2]],"p99":7}`,
	} {
		var h Histogram
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("accepted %s", bad)
		} else if json.Valid([]byte(bad)) && !errors.Is(err, ErrHistogram) {
			t.Errorf("%s: err = %v, want ErrHistogram", bad, err)
		}
	}
}

func TestHistogramEmpty(t *testing.T) {
	h := NewHistogram("us")
	h.Add(math.NaN())
	h.Add(math.Inf(-1))
	if h.Count() != 0 || h.Invalid() != 2 {
		t.Fatalf("count %d invalid %d", h.Count(), h.Invalid())
	}
	for name, v := range map[string]float64{"min": h.Min(), "max": h.Max(), "mean": h.Mean(), "stddev": h.StdDev(), "p50": h.Quantile(0.5)} {
		if !math.IsNaN(v) {
			t.Errorf("%s of an empty histogram = %v, want NaN", name, v)
		}
	}
	if h.CDF() != nil {
		t.Errorf("CDF = %v, want nil", h.CDF())
	}
	var back Histogram
	if err := json.Unmarshal(mustJSON(t, h), &back); err != nil || back.Count() != 0 || back.Invalid() != 2 {
		t.Fatalf("empty round trip: %v, %s", err, mustJSON(t, &back))
	}
	back.Add(5)
	if back.Min() != 5 || back.Max() != 5 {
		t.Fatalf("first observation after decoding an empty histogram: min %v max %v", back.Min(), back.Max())
	}
	// The zero value is usable too.
	var z Histogram
	z.Add(3)
	if z.Quantile(0.5) != 3 {
		t.Fatalf("zero value: p50 = %v", z.Quantile(0.5))
	}
}

func TestHistogramZeroAndNegative(t *testing.T) {
	h := NewHistogram("us")
	h.AddN(0, 6)
	h.Add(-1)
	h.AddN(10, 3)
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("p50 = %v, want 0 (the zero bucket)", got)
	}
	if got := h.Quantile(0.01); got != 0 {
		t.Errorf("p1 = %v, want 0", got)
	}
	if got := h.Quantile(0.9); math.Abs(got-10)/10 > HistogramRelError {
		t.Errorf("p90 = %v, want 10 within %v", got, HistogramRelError)
	}
	cdf := h.CDF()
	want := []CDFPoint{{0, 0.7}, {10, 1}}
	if len(cdf) != 2 || cdf[0] != want[0] || cdf[1] != want[1] {
		t.Fatalf("CDF = %v, want %v", cdf, want)
	}
}

func TestHistogramCDF(t *testing.T) {
	h := NewHistogram("us")
	rng := rand.New(rand.NewPCG(7, 8))
	vals := make([]float64, 20_000)
	for i := range vals {
		vals[i] = 5 + 20*rng.Float64()
		h.Add(vals[i])
	}
	sort.Float64s(vals)
	cdf := h.CDF()
	if len(cdf) < 10 {
		t.Fatalf("only %d points", len(cdf))
	}
	for i, p := range cdf {
		if i > 0 && (p.Value <= cdf[i-1].Value || p.Fraction <= cdf[i-1].Fraction) {
			t.Fatalf("not increasing at %d: %v after %v", i, p, cdf[i-1])
		}
		// Fraction is exactly the share of observations at most Value.
		if n := sort.SearchFloat64s(vals, math.Nextafter(p.Value, math.Inf(1))); math.Abs(float64(n)/float64(len(vals))-p.Fraction) > 1e-12 {
			t.Fatalf("point %v: %d of %d values are at most %v", p, n, len(vals), p.Value)
		}
	}
	if last := cdf[len(cdf)-1]; last.Fraction != 1 || last.Value != h.Max() {
		t.Fatalf("last point %v, want (max %v, 1)", last, h.Max())
	}
}

func TestBucketEdgesPartitionValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for n := 0; n < 100_000; n++ {
		v := math.Exp2(rng.Float64()*80 - 40)
		if n%7 == 0 {
			v = lowerEdge(int32(rng.IntN(5000) - 2500)) // exactly on an edge
		}
		i := bucketOf(v)
		if v < lowerEdge(i) || v >= lowerEdge(i+1) {
			t.Fatalf("%v in bucket %d = [%v, %v)", v, i, lowerEdge(i), lowerEdge(i+1))
		}
	}
	// 1e154 is about the largest observation whose square the sums hold;
	// larger ones are invalid (TestObservationThatOverflowsTheSumsIsInvalid).
	for _, v := range []float64{math.SmallestNonzeroFloat64, 1e154} {
		h := NewHistogram("x")
		h.Add(v)
		if h.Quantile(0.5) != v {
			t.Errorf("extreme %v: p50 %v", v, h.Quantile(0.5))
		}
	}
}

func mustJSON(t *testing.T, h *Histogram) []byte {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func equalJSON(t *testing.T, a, b *Histogram) bool {
	t.Helper()
	return string(mustJSON(t, a)) == string(mustJSON(t, b))
}

func TestObservationThatOverflowsTheSumsIsInvalid(t *testing.T) {
	h := NewHistogram("us")
	h.Add(10)
	h.Add(math.MaxFloat64)
	h.Add(2e154)
	if h.Count() != 1 || h.Invalid() != 2 || h.Max() != 10 {
		t.Fatalf("count %d invalid %d max %v; want the huge values invalid", h.Count(), h.Invalid(), h.Max())
	}
	if _, err := json.Marshal(h); err != nil {
		t.Fatalf("a histogram that met huge values cannot be stored: %v", err)
	}
	big := NewHistogram("us")
	big.Add(1e154)
	twice := NewHistogram("us")
	twice.Add(1e154)
	if err := big.Merge(twice); !errors.Is(err, ErrHistogram) || big.Count() != 1 {
		t.Fatalf("a merge whose sums overflow: %v, count %d", err, big.Count())
	}
}
