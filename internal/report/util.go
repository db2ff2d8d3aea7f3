package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

func sortedStrings[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// formatValue prints a measured value with about four significant digits:
// enough to compare, few enough to read.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// formatQuantity prints a value with its unit, scaling bit rates to the
// SI prefix people read them in (9.59 Gbit/s, not 9585128886 bit/s).
func formatQuantity(v float64, unit string) string {
	if rest, ok := strings.CutPrefix(unit, "bit/s"); ok && finite(v) {
		for _, p := range []struct {
			prefix string
			scale  float64
		}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
			if math.Abs(v) >= p.scale {
				return formatValue(v/p.scale) + " " + p.prefix + "bit/s" + rest
			}
		}
	}
	if unit == "B" && finite(v) {
		// Memory and disk sizes read in binary units, as tools print them.
		for _, p := range []struct {
			prefix string
			scale  float64
		}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if math.Abs(v) >= p.scale {
				return formatValue(v/p.scale) + " " + p.prefix + "B"
			}
		}
	}
	return formatValue(v) + " " + unit
}

func formatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// verdict says whether a normalised value is better, worse or not
// distinguishable from the baseline, given the metric's direction.
func verdict(c Cell, better string) int {
	if !c.Comparable {
		return 0
	}
	above, below := c.Normalized.CILow > 1, c.Normalized.CIHigh < 1
	if better == "lower" {
		above, below = below, above
	}
	switch {
	case above:
		return 1
	case below:
		return -1
	}
	return 0
}

// failureStep names what failed: a workload step, or the guest's start
// (recorded with no workload).
func failureStep(f store.Failure) string {
	if f.WorkloadID == "" {
		return "guest start"
	}
	return f.WorkloadID
}

// failureRep is the failed repetition, counted from 1 as people count
// (the store counts from 0); empty for a guest start.
func failureRep(f store.Failure) string {
	if f.WorkloadID == "" || f.Repetition < 0 {
		return ""
	}
	return strconv.Itoa(f.Repetition + 1)
}

// nonFiniteNote explains values left out of the statistics; empty when none were.
func nonFiniteNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d sample value(s) were NaN or infinite and are left out of the statistics (kept in the raw data).", n)
}

// sharedCPUsNote says which groups' guests shared CPUs, from the
// oversubscription the run stored with each pinned guest: per-guest
// figures there are shares of a CPU, not what a guest does alone. Empty
// when no guest shared.
func sharedCPUsNote(run store.Run) string {
	ratio := map[string]string{}
	for _, g := range run.Guests {
		if r := g.Details["oversubscription"]; r != "" {
			ratio[g.Group] = r
		}
	}
	if len(ratio) == 0 {
		return ""
	}
	groups := make([]string, 0, len(ratio))
	for g := range ratio {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s %s×", g, ratio[g])
	}
	return "guests share CPUs: more vCPUs were pinned than the pool has CPUs (" + strings.Join(parts, ", ") +
		" at the largest fleet); their per-guest figures are shares of a CPU."
}

func formatEstimate(e stats.Estimate) string {
	if math.IsNaN(e.Value) {
		return "n/a"
	}
	if math.IsNaN(e.Low) || math.IsNaN(e.High) {
		return formatRatio(e.Value) + " [no interval]"
	}
	if e.High-e.Low < 0.005 {
		return formatRatio(e.Value)
	}
	return fmt.Sprintf("%s [%s, %s]", formatRatio(e.Value), formatRatio(e.Low), formatRatio(e.High))
}

// stickyWriter keeps the first write error, so that a renderer issuing
// many small writes can check once at the end and still report a closed
// pipe or a full disk.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}
