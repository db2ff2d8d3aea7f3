package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/internal/workload"
)

// CompareOptions set what counts as a real difference between two runs.
type CompareOptions struct {
	// Alpha is the significance level of the permutation test.
	Alpha float64 `json:"alpha"`
	// NoiseFloor is the smallest relative change worth reporting, however
	// significant: a 0.5% difference can be real and still not matter.
	NoiseFloor float64 `json:"noise_floor"`
	// Rounds of the permutation test when the samples are too many to
	// enumerate every split.
	Rounds int `json:"rounds"`
	// Baseline: A is a baseline, whose samples will not grow; what could
	// decide an undecided row is a run B of more repetitions.
	Baseline bool `json:"baseline,omitempty"`
}

// DefaultCompareOptions: p < 0.01 and more than 5% change, the thresholds
// regression tests of virtual machine monitors commonly use.
var DefaultCompareOptions = CompareOptions{Alpha: 0.01, NoiseFloor: 0.05, Rounds: 10000}

// Verdicts of an A/B row.
const (
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	VerdictSame   = "no significant difference"
	// VerdictUndecided: the change exceeds the noise floor, but the
	// repetitions are too few for the test ever to reach alpha, so "no
	// significant difference" would claim what was not tested.
	VerdictUndecided = "undecided (too few repetitions)"
	VerdictOnlyA     = "only in A"
	VerdictOnlyB     = "only in B"
)

// verdictRank orders verdicts for reading: what got worse first, then
// what could not be decided.
var verdictRank = map[string]int{VerdictWorse: 0, VerdictUndecided: 1, VerdictBetter: 2, VerdictSame: 3, VerdictOnlyA: 4, VerdictOnlyB: 5}

// ABRow compares one metric of one workload in one guest group.
type ABRow struct {
	Group      string           `json:"group"`
	WorkloadID string           `json:"workload_id"`
	Params     string           `json:"params"`
	Metric     string           `json:"metric"`
	Unit       string           `json:"unit"`
	Better     workload.Better  `json:"better"`
	A          stats.Summary    `json:"a"`
	B          stats.Summary    `json:"b"`
	Change     stats.Normalized `json:"change"` // B relative to A
	P          float64          `json:"p"`
	Verdict    string           `json:"verdict"`
	// RepetitionsA and RepetitionsB are how many repetitions the values
	// of each side came from: a group of several guests gives as many
	// values a repetition.
	RepetitionsA int `json:"repetitions_a"`
	RepetitionsB int `json:"repetitions_b"`
	// NeedsRepetitions, for an undecided row, is how many repetitions a
	// side could decide it; against a baseline, how many of B alone.
	NeedsRepetitions int `json:"needs_repetitions,omitempty"`
}

// MarshalJSON writes a p that is not a finite number as null, with what it
// was (stats.MarshalFinite).
func (r ABRow) MarshalJSON() ([]byte, error) {
	type plain ABRow
	return stats.MarshalFinite(plain(r))
}

// ABComparison is run B measured against run A.
type ABComparison struct {
	A, B    store.Run
	Options CompareOptions
	Rows    []ABRow
}

type abKey struct{ group, workload, params, metric string }

// CompareRuns pairs the samples of two runs by guest group, workload,
// parameters and metric and tests each pair.
func CompareRuns(a store.Run, as []store.Sample, b store.Run, bs []store.Sample, o CompareOptions) ABComparison {
	c := ABComparison{A: a, B: b, Options: o}
	var order []abKey
	values := map[abKey]*[2][]float64{}
	reps := map[abKey]*[2]map[int]bool{}
	meta := map[abKey]store.Sample{}
	collect := func(side int, samples []store.Sample) {
		for _, s := range samples {
			k := abKey{s.Group, s.WorkloadID, paramString(s.Params), s.Metric}
			if values[k] == nil {
				values[k] = &[2][]float64{}
				reps[k] = &[2]map[int]bool{{}, {}}
				meta[k] = s
				order = append(order, k)
			}
			values[k][side] = append(values[k][side], s.Value)
			reps[k][side][s.Repetition] = true
		}
	}
	collect(0, as)
	collect(1, bs)
	for _, k := range order {
		v, m := values[k], meta[k]
		row := ABRow{Group: k.group, WorkloadID: k.workload, Params: k.params, Metric: k.metric, Unit: m.Unit, Better: m.Better,
			A: stats.Summarize(v[0], stats.DefaultConfidence), B: stats.Summarize(v[1], stats.DefaultConfidence), P: 1,
			RepetitionsA: len(reps[k][0]), RepetitionsB: len(reps[k][1])}
		switch {
		case len(v[1]) == 0:
			row.Verdict = VerdictOnlyA
		case len(v[0]) == 0:
			row.Verdict = VerdictOnlyB
		default:
			row.Change = stats.Normalize(row.B, row.A)
			row.P = stats.PermutationTest(v[0], v[1], o.Rounds, 1)
			row.Verdict = verdictFor(row, o)
			if row.Verdict == VerdictUndecided {
				row.NeedsRepetitions = needsRepetitions(row, o)
			}
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}

// needsRepetitions is how many repetitions could decide an undecided row:
// a side, or of B alone against a baseline. A repetition adds to each side
// as many values as it gave before (the group's guests).
func needsRepetitions(r ABRow, o CompareOptions) int {
	perA, perB := perRepetition(r.A.N, r.RepetitionsA), perRepetition(r.B.N, r.RepetitionsB)
	if o.Baseline {
		return stats.MinRepetitionsAgainst(o.Alpha, r.A.N, perB)
	}
	return stats.MinRepetitions(o.Alpha, perA, perB)
}

// perRepetition is how many values a repetition gave, rounded up: a guest
// whose step failed once leaves a repetition short, not the group smaller.
func perRepetition(values, repetitions int) int {
	if repetitions == 0 {
		return 1
	}
	return (values + repetitions - 1) / repetitions
}

func verdictFor(r ABRow, o CompareOptions) string {
	change := r.Change.Ratio - 1
	switch {
	case math.IsNaN(change) || math.Abs(change) <= o.NoiseFloor:
		return VerdictSame
	case stats.SmallestP(r.A.N, r.B.N) >= o.Alpha:
		return VerdictUndecided
	case r.P >= o.Alpha:
		return VerdictSame
	}
	if (change > 0) == (r.Better != workload.LowerIsBetter) {
		return VerdictBetter
	}
	return VerdictWorse
}

func paramString(p workload.Params) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return strings.Join(parts, " ")
}

// WriteABTable prints one line per compared metric, changed ones first.
func WriteABTable(out io.Writer, c ABComparison, opts TableOptions) error {
	w := &stickyWriter{w: out}
	fmt.Fprintf(w, "run %d (%s) → run %d (%s): significant at p < %g and beyond ±%.0f%%\n",
		c.A.ID, termtext.Safe(c.A.ScenarioName), c.B.ID, termtext.Safe(c.B.ScenarioName), c.Options.Alpha, 100*c.Options.NoiseFloor)
	rows := sortedABRows(c)
	table := [][]string{{"group", "workload / metric", "A", "B", "change", "p", "verdict"}}
	verdicts := []int{0}
	for _, r := range rows {
		change, p := "—", "—"
		if r.Verdict != VerdictOnlyA && r.Verdict != VerdictOnlyB {
			change = changeText(r)
			p = fmt.Sprintf("%.3g", r.P)
		}
		table = append(table, []string{r.Group, fmt.Sprintf("%s %s %s", r.WorkloadID, r.Metric, arrow(string(r.Better))),
			cellValue(r.A, r.Unit), cellValue(r.B, r.Unit), change, p, r.Verdict})
		v := 0
		switch r.Verdict {
		case VerdictBetter:
			v = 1
		case VerdictWorse:
			v = -1
		}
		verdicts = append(verdicts, v)
	}
	writeAligned(w, table, func(i, j int) int {
		if j == len(table[i])-1 {
			return verdicts[i]
		}
		return 0
	}, opts.Color)
	for _, note := range undecidedNotes(c) {
		fmt.Fprintln(w, "note: "+note)
	}
	return w.err
}

// undecidedNotes say, for each set of repetition and value counts behind
// undecided rows, why they cannot be decided and what could decide them.
func undecidedNotes(c ABComparison) []string {
	type sizes struct{ repsA, repsB, a, b, needs int }
	count := map[sizes]int{}
	var order []sizes
	for _, r := range c.Rows {
		if r.Verdict != VerdictUndecided {
			continue
		}
		k := sizes{r.RepetitionsA, r.RepetitionsB, r.A.N, r.B.N, r.NeedsRepetitions}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	notes := make([]string, 0, len(order))
	for _, k := range order {
		what := fmt.Sprintf("%d changes beyond ±%.3g%% are", count[k], 100*c.Options.NoiseFloor)
		if count[k] == 1 {
			what = fmt.Sprintf("1 change beyond ±%.3g%% is", 100*c.Options.NoiseFloor)
		}
		with := fmt.Sprintf("%d and %d repetitions", k.repsA, k.repsB)
		if k.a != k.repsA || k.b != k.repsB {
			with += fmt.Sprintf(" (%d and %d values)", k.a, k.b)
		}
		can := fmt.Sprintf("%d repetitions a side can decide", k.needs)
		if c.Options.Baseline {
			can = fmt.Sprintf("a run of %d repetitions can decide against the baseline's %d values", k.needs, k.a)
		}
		notes = append(notes, fmt.Sprintf("%s undecided: with %s the smallest p the test can give is %.2g, not below %g; %s.",
			what, with, stats.SmallestP(k.a, k.b), c.Options.Alpha, can))
	}
	return notes
}

// changeText is B's change against A in percent with its 95% interval;
// with one sample on a side there is no interval, rather than one of no
// width, and "n/a" when A's mean was 0.
func changeText(r ABRow) string {
	if !r.comparable() {
		return "n/a"
	}
	s := signedPercent(100*(r.Change.Ratio-1)) + "%"
	if r.A.N < 2 || r.B.N < 2 {
		return s + " [no interval]"
	}
	return fmt.Sprintf("%s [%s, %s]", s, signedPercent(100*(r.Change.CILow-1)), signedPercent(100*(r.Change.CIHigh-1)))
}

func cellValue(s stats.Summary, unit string) string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (n=%d)", formatQuantity(s.Mean, unit), s.N)
}

// WriteABJSON writes the comparison.
func WriteABJSON(w io.Writer, c ABComparison) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		A       int64          `json:"run_a"`
		B       int64          `json:"run_b"`
		Options CompareOptions `json:"options"`
		Rows    []ABRow        `json:"rows"`
	}{c.A.ID, c.B.ID, c.Options, c.Rows})
}
