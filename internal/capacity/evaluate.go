package capacity

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
)

// Sample is one value one guest of the scaled group reported.
type Sample struct {
	// Metric is WORKLOAD_ID.METRIC.
	Metric string
	Unit   string
	Guest  string
	// Round is which measurement of the size the sample came from, each
	// a fleet launched afresh (the search sets it); Repetition is the
	// step's repetition within it.
	Round      int
	Repetition int
	Value      float64
}

// Verdict is what the measurements of a size say of an SLO, or of the
// size as a whole.
type Verdict string

const (
	// Holds: the interval lies on the bound's good side.
	Holds Verdict = "holds"
	// Fails: the interval lies on its bad side.
	Fails Verdict = "fails"
	// Undecided: the interval straddles the bound; more repetitions
	// could tell.
	Undecided Verdict = "undecided"
)

// Check is one SLO judged at one size: the figure it bounds (the worst
// guest's, the median guest's or the total, as a ratio to alone where it
// says so; in seconds for a duration bound) with its interval, at the
// look that decided it or the size's last.
type Check struct {
	SLO     int     `json:"slo"` // index into the search's SLOs
	Value   float64 `json:"value"`
	Low     float64 `json:"ci_low"`
	High    float64 `json:"ci_high"`
	N       int     `json:"n"` // repetitions the interval is made of
	Verdict Verdict `json:"verdict"`
	// Look is the size's measurements at that look, and Level the
	// two-sided level its interval was at there (its confidence is
	// 1 − Level): the share of 1 − confidence the look was given.
	Look  int     `json:"look"`
	Level float64 `json:"level"`
	// Missing counts repetitions in which some guest reported nothing: a
	// size whose guests do not all deliver does not fit.
	Missing int `json:"missing,omitempty"`
	// ownWidth and aloneWidth are the relative half-widths of the
	// size's figure and of the alone figure a ratio is to: which of
	// the two to measure again.
	ownWidth, aloneWidth float64
}

// ErrUnknownMetric is returned when the first size measured reports no
// sample of an SLO's metric.
var ErrUnknownMetric = errors.New("metric not measured")

// ErrUnit is returned when a duration bound meets a metric that is not a
// time.
var ErrUnit = errors.New("bound and metric units differ")

// CheckMeasured checks the SLOs against what a size really produced:
// each names a metric measured, and a duration bound a metric in a time
// unit. The catalog cannot know every workload's metrics beforehand.
func CheckMeasured(slos []SLO, samples []Sample) error {
	units := map[string]string{}
	for _, s := range samples {
		units[s.Metric] = s.Unit
	}
	for _, slo := range slos {
		unit, ok := units[slo.Name()]
		if !ok {
			var names []string
			for m := range units {
				names = append(names, m)
			}
			sort.Strings(names)
			return fmt.Errorf("--slo %q: %w: the scenario's scaled group reported no %s; it reported %s",
				slo.Text, ErrUnknownMetric, slo.Name(), strings.Join(names, ", "))
		}
		if _, isTime := inSeconds(1, unit); slo.Duration && !isTime {
			return fmt.Errorf("--slo %q: %w: the bound is a duration, %s is in %s", slo.Text, ErrUnit, slo.Name(), unit)
		}
	}
	return nil
}

// series reduces a size's samples of one SLO's metric to one figure per
// repetition: the worst guest's, the median guest's or the sum. A
// repetition in which fewer than size guests reported counts as missing.
func series(slo SLO, size int, samples []Sample) (values []float64, missing int) {
	type rep struct{ round, rep int }
	byRep := map[rep][]float64{}
	var order []rep
	for _, s := range samples {
		if s.Metric != slo.Name() || math.IsNaN(s.Value) {
			continue
		}
		v := s.Value
		if slo.Duration {
			v, _ = inSeconds(v, s.Unit)
		}
		k := rep{s.Round, s.Repetition}
		if _, seen := byRep[k]; !seen {
			order = append(order, k)
		}
		byRep[k] = append(byRep[k], v)
	}
	for _, r := range order {
		vs := byRep[r]
		if len(vs) < size {
			missing++
			continue
		}
		values = append(values, reduce(slo, vs))
	}
	return values, missing
}

// reduce is the figure of one repetition the SLO bounds.
func reduce(slo SLO, vs []float64) float64 {
	switch slo.Scope {
	case ScopeTotal:
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		return sum
	case ScopeMedian:
		s := stats.Summarize(vs, stats.DefaultConfidence)
		return s.Median
	}
	if slo.AtLeast {
		return slices.Min(vs)
	}
	return slices.Max(vs)
}

// judge checks one SLO at a size. alone is the size-1 summary of the
// metric's per-guest figure, for a bound relative to it.
func judge(slo SLO, index, size int, samples []Sample, alone stats.Summary, confidence float64) Check {
	values, missing := series(slo, size, samples)
	s := stats.Summarize(values, confidence)
	c := Check{SLO: index, Value: s.Mean, Low: s.CILow, High: s.CIHigh, N: s.N, Missing: missing}
	if slo.Alone {
		if size == 1 {
			// Alone is this very size: the ratio is 1 by definition.
			c.Value, c.Low, c.High = 1, 1, 1
		} else {
			r := stats.Normalize(s, alone)
			c.Value, c.Low, c.High = r.Ratio, r.CILow, r.CIHigh
			c.ownWidth, c.aloneWidth = s.RelativeHalfWidth(), alone.RelativeHalfWidth()
		}
	}
	switch {
	case missing > 0:
		c.Verdict = Fails
	case s.N < 2 || math.IsNaN(c.Low) || math.IsNaN(c.High):
		// One repetition bounds nothing.
		c.Verdict = Undecided
	case slo.holds(c.Low) && slo.holds(c.High):
		c.Verdict = Holds
	case !slo.holds(c.Low) && !slo.holds(c.High):
		c.Verdict = Fails
	default:
		c.Verdict = Undecided
	}
	return c
}

// aloneSummary is the per-guest figure of a size-1 measurement.
func aloneSummary(slo SLO, samples []Sample, confidence float64) stats.Summary {
	values, _ := series(slo, 1, samples)
	return stats.Summarize(values, confidence)
}

// overall is a size's verdict from its checks: it fails when any SLO
// fails, holds when every one holds.
func overall(checks []Check) Verdict {
	v := Holds
	for _, c := range checks {
		switch c.Verdict {
		case Fails:
			return Fails
		case Undecided:
			v = Undecided
		}
	}
	return v
}

// MarshalJSON writes a figure that is not a finite number (a ratio to an
// alone figure of 0) as null, with what it was (stats.MarshalFinite).
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	return stats.MarshalFinite(plain(c))
}
