package stats

import (
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Tail is the upper quantiles of a set of durations or latencies, as load
// and start-up tools report them (kube-burner's pod latencies: P50, P95,
// P99, max): the empirical quantile, a value of the set.
type Tail struct {
	N                  int
	P50, P95, P99, Max float64
}

// TailOf summarises values; the zero Tail for none.
func TailOf(values []float64) Tail {
	if len(values) == 0 {
		return Tail{}
	}
	xs := append([]float64(nil), values...)
	sort.Float64s(xs)
	q := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, xs, nil) }
	return Tail{N: len(xs), P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: xs[len(xs)-1]}
}
