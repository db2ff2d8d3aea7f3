package stats

import "math"

// Normalized is a guest's value expressed relative to the baseline's.
type Normalized struct {
	// Ratio is value / baseline: 1.00 means equal, 0.77 means 77% of the
	// baseline's value, whatever the metric's direction.
	Ratio float64 `json:"ratio"`
	// CILow and CIHigh bound Ratio. They come from first-order propagation
	// (the delta method) of both means' relative intervals, adequate for the
	// small relative errors benchmarks have; NaN when the baseline is 0.
	CILow  float64 `json:"ratio_ci_low"`
	CIHigh float64 `json:"ratio_ci_high"`
}

// Normalize expresses s relative to base by their means.
func Normalize(s, base Summary) Normalized {
	if base.Mean == 0 {
		return Normalized{Ratio: math.NaN(), CILow: math.NaN(), CIHigh: math.NaN()}
	}
	r := s.Mean / base.Mean
	relS := relHalf(s)
	relB := relHalf(base)
	half := math.Abs(r) * math.Sqrt(relS*relS+relB*relB)
	return Normalized{Ratio: r, CILow: r - half, CIHigh: r + half}
}

func relHalf(s Summary) float64 {
	if s.Mean == 0 {
		return 0
	}
	return (s.CIHigh - s.Mean) / math.Abs(s.Mean)
}
