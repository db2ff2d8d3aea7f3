package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestOverheadIndex(t *testing.T) {
	terms := []IndexTerm{
		// cpu: 10% slower.
		{Workload: "cpu", Guest: []float64{90, 90, 90}, Base: []float64{100, 100, 100}},
		// fio: two metrics, one 10% better throughput, one 10% worse latency:
		// they cancel within the workload.
		{Workload: "fio", Guest: []float64{110, 110}, Base: []float64{100, 100}},
		{Workload: "fio", Guest: []float64{110, 110}, Base: []float64{100, 100}, LowerIsBetter: true},
	}
	e := OverheadIndex(terms, 0.95)
	want := math.Sqrt(0.9 * math.Sqrt(1.1/1.1))
	if !near(e.Value, want, 1e-12) {
		t.Fatalf("index = %v, want %v", e.Value, want)
	}
	if !near(e.Low, e.Value, 1e-12) || !near(e.High, e.Value, 1e-12) {
		t.Fatalf("noise-free data must give a zero-width interval: %+v", e)
	}
	if e := OverheadIndex(nil, 0.95); !math.IsNaN(e.Value) || !math.IsNaN(e.Low) {
		t.Fatalf("no terms: %+v", e)
	}
	one := OverheadIndex([]IndexTerm{{Workload: "cpu", Guest: []float64{90}, Base: []float64{100}}}, 0.95)
	if !near(one.Value, 0.9, 1e-12) || !math.IsNaN(one.Low) || !math.IsNaN(one.High) {
		t.Fatalf("one repetition has a value but no interval: %+v", one)
	}
}

// TestOverheadIndexKnownInterval checks the interval against a hand
// computation: one term, per-repetition ratios 0.9, 0.8, 1.0.
func TestOverheadIndexKnownInterval(t *testing.T) {
	e := OverheadIndex([]IndexTerm{{Workload: "cpu", Guest: []float64{90, 80, 100}, Base: []float64{100, 100, 100}}}, 0.95)
	logs := []float64{math.Log(0.9), math.Log(0.8), math.Log(1.0)}
	m := (logs[0] + logs[1] + logs[2]) / 3
	ss := 0.0
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	// t(0.975, 2) = 4.302653; the centre is the ratio of the means, 0.9.
	half := 4.302652730 * math.Sqrt(ss/2) / math.Sqrt(3)
	if !near(e.Value, 0.9, 1e-12) || !near(e.Low, 0.9*math.Exp(-half), 1e-6) || !near(e.High, 0.9*math.Exp(half), 1e-6) {
		t.Fatalf("index = %+v, want 0.9 [%v, %v]", e, 0.9*math.Exp(-half), 0.9*math.Exp(half))
	}
}

// TestOverheadIndexCoverage simulates runs of a small suite whose true index
// is known and counts how often the 95% interval holds it. The suite mixes
// quiet and noisy metrics and two metrics of one execution that move
// together (IOPS and its inverse, latency), which an interval assuming
// independent metrics would get wrong. The seed is fixed, so the figures
// are the same on every machine.
func TestOverheadIndexCoverage(t *testing.T) {
	type metric struct {
		workload       string
		guest, base    float64 // true means
		cv             float64 // relative noise of one repetition
		inverseOfPrior bool    // latency: the inverse of the previous metric's values
	}
	suite := []metric{
		{workload: "cpu", guest: 90, base: 100, cv: 0.01},
		{workload: "fio", guest: 1100, base: 1000, cv: 0.05},
		{workload: "fio", cv: 0.05, inverseOfPrior: true},
		{workload: "memory", guest: 200, base: 210, cv: 0.03},
	}
	// cpu 0.9, fio (1.1 twice), memory 200/210; the latency's true means
	// carry the same 1+cv² factor on both sides, so its ratio is the IOPS'.
	truth := math.Exp((math.Log(0.9) + math.Log(1.1) + math.Log(200.0/210)) / 3)
	const runs = 2000
	rng := rand.New(rand.NewPCG(2026, 11))
	for _, n := range []int{3, 5} {
		covered := 0
		for run := 0; run < runs; run++ {
			terms := make([]IndexTerm, len(suite))
			for i, m := range suite {
				g, b := make([]float64, n), make([]float64, n)
				for r := 0; r < n; r++ {
					if m.inverseOfPrior {
						g[r], b[r] = 1/terms[i-1].Guest[r], 1/terms[i-1].Base[r]
						continue
					}
					g[r] = m.guest * (1 + m.cv*rng.NormFloat64())
					b[r] = m.base * (1 + m.cv*rng.NormFloat64())
				}
				terms[i] = IndexTerm{Workload: m.workload, Guest: g, Base: b, LowerIsBetter: m.inverseOfPrior}
			}
			e := OverheadIndex(terms, 0.95)
			if e.Low <= truth && truth <= e.High {
				covered++
			}
		}
		share := float64(covered) / runs
		t.Logf("%d repetitions: the 95%% interval held the true index in %.1f%% of %d runs", n, 100*share, runs)
		if share < 0.90 {
			t.Errorf("%d repetitions: coverage %.3f, want at least 0.90", n, share)
		}
		if share > 0.99 {
			t.Errorf("%d repetitions: coverage %.3f: the interval is needlessly wide", n, share)
		}
	}
}

// A count that is zero in some repetitions (retransmits) has no ratio
// there; it must drop out rather than take the interval away.
func TestOverheadIndexLeavesOutTermsWithZeros(t *testing.T) {
	cpu := IndexTerm{Workload: "cpu", Guest: []float64{90, 80, 100}, Base: []float64{100, 100, 100}}
	retrans := IndexTerm{Workload: "net", Guest: []float64{0, 3, 1}, Base: []float64{2, 0, 1}, LowerIsBetter: true}
	with := OverheadIndex([]IndexTerm{cpu, retrans}, 0.95)
	without := OverheadIndex([]IndexTerm{cpu}, 0.95)
	if math.IsNaN(with.Low) || with != without {
		t.Fatalf("with a zero-valued term %+v, without it %+v", with, without)
	}
}
