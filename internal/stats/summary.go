package stats

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Summary describes the repetitions of one metric.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Stddev float64 `json:"stddev"` // sample standard deviation (n-1); 0 when N < 2
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// CILow and CIHigh bound the mean at Confidence, from Student's t
	// distribution (the repetitions are few, so the normal approximation
	// would be too narrow). Both equal Mean when N < 2.
	CILow      float64 `json:"ci_low"`
	CIHigh     float64 `json:"ci_high"`
	Confidence float64 `json:"confidence"`
}

// DefaultConfidence is the level of the intervals vfleet reports.
const DefaultConfidence = 0.95

// Summarize computes a Summary at the given confidence level (0 < c < 1).
// It returns the zero Summary for no values.
func Summarize(values []float64, confidence float64) Summary {
	n := len(values)
	if n == 0 {
		return Summary{Confidence: confidence}
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	s := Summary{
		N:          n,
		Mean:       stat.Mean(sorted, nil),
		Median:     median(sorted),
		Min:        sorted[0],
		Max:        sorted[n-1],
		Confidence: confidence,
	}
	s.CILow, s.CIHigh = s.Mean, s.Mean
	if n >= 2 {
		s.Stddev = stat.StdDev(sorted, nil)
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(1 - (1-confidence)/2)
		half := t * s.Stddev / math.Sqrt(float64(n))
		s.CILow, s.CIHigh = s.Mean-half, s.Mean+half
	}
	return s
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// RelativeHalfWidth is the CI half-width as a fraction of the mean, the
// usual "±x%" precision statement; +Inf when the mean is 0.
func (s Summary) RelativeHalfWidth() float64 {
	if s.Mean == 0 {
		return math.Inf(1)
	}
	return math.Abs(s.CIHigh-s.Mean) / math.Abs(s.Mean)
}

func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
