package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// IndexTerm is one metric of one workload: the guest's and the baseline's
// repetitions.
type IndexTerm struct {
	Workload      string
	Guest, Base   []float64
	LowerIsBetter bool
}

// Estimate is a value with a confidence interval.
type Estimate struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// OverheadIndex summarises how a guest does against the baseline over a
// whole suite: each metric becomes a score (the ratio of means, inverted for
// lower-is-better metrics, so above 1 is always better), a workload's score
// is the geometric mean of its metrics' (so a tool reporting four metrics
// does not outweigh one reporting one), and the index is the geometric mean
// over workloads. Its interval is a percentile bootstrap: repetitions are
// resampled within every guest and baseline cell. Terms with a zero or
// negative mean cannot be scored and are left out.
func OverheadIndex(terms []IndexTerm, confidence float64, rounds int, seed uint64) Estimate {
	usable := terms[:0:0]
	for _, t := range terms {
		if len(t.Guest) > 0 && len(t.Base) > 0 && meanOf(t.Guest) > 0 && meanOf(t.Base) > 0 {
			usable = append(usable, t)
		}
	}
	if len(usable) == 0 {
		return Estimate{Value: math.NaN(), Low: math.NaN(), High: math.NaN()}
	}
	point := index(usable, meanOf)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	resampledMean := func(v []float64) float64 {
		s := 0.0
		for range v {
			s += v[rng.IntN(len(v))]
		}
		return s / float64(len(v))
	}
	boots := make([]float64, 0, rounds)
	for r := 0; r < rounds; r++ {
		boots = append(boots, index(usable, resampledMean))
	}
	sort.Float64s(boots)
	alpha := (1 - confidence) / 2
	return Estimate{Value: point, Low: quantileSorted(boots, alpha), High: quantileSorted(boots, 1-alpha)}
}

func index(terms []IndexTerm, mean func([]float64) float64) float64 {
	perWorkload := map[string][]float64{}
	var order []string
	for _, t := range terms {
		score := math.Log(mean(t.Guest) / mean(t.Base))
		if t.LowerIsBetter {
			score = -score
		}
		if _, seen := perWorkload[t.Workload]; !seen {
			order = append(order, t.Workload)
		}
		perWorkload[t.Workload] = append(perWorkload[t.Workload], score)
	}
	total := 0.0
	for _, w := range order {
		total += meanOf(perWorkload[w])
	}
	return math.Exp(total / float64(len(order)))
}

// quantileSorted interpolates linearly between order statistics.
func quantileSorted(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return sorted[lo]
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}
