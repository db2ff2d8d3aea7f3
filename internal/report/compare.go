package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/internal/workload"
)

// CompareOptions set what counts as a real difference between two runs
// and how long a comparison may measure to find out.
type CompareOptions struct {
	// Alpha bounds the chance that a comparison calls any unchanged metric
	// better or worse: family-wise over all its metrics (Holm) and over
	// every look of its repetitions.
	Alpha float64 `json:"alpha"`
	// NoiseFloor is the relative change within which a change does not
	// matter: a metric whose change's interval lies within it is the same.
	NoiseFloor float64 `json:"noise_floor"`
	// Equivalence bounds the chance that a metric whose change is at the
	// noise floor is called the same.
	Equivalence float64 `json:"equivalence"`
	// MaxRepetitions is the last look: the most repetitions a side (of B
	// against a baseline) a comparison measures while undecided. The
	// looks' levels depend on it, so a run is judged with the maximum it
	// was measured under.
	MaxRepetitions int `json:"max_repetitions"`
	// Baseline: A is a baseline, whose samples will not grow; what could
	// decide an undecided row is a run B of more repetitions.
	Baseline bool `json:"baseline,omitempty"`
}

// DefaultCompareOptions: a false "better" or "worse" in at most 1% of
// comparisons whatever their metrics, a change within ±5% the same, and
// up to 40 repetitions a side, which decide a 5% change at a 5%
// coefficient of variation in more than 80% of comparisons
// (TestSequentialDecisionsSimulated).
var DefaultCompareOptions = CompareOptions{Alpha: 0.01, NoiseFloor: 0.05, Equivalence: 0.05, MaxRepetitions: 40}

// plan is the sequential plan of a comparison of family metrics.
func (o CompareOptions) plan(family int) stats.Plan {
	return stats.Plan{Alpha: o.Alpha, Equivalence: o.Equivalence, Floor: o.NoiseFloor, MaxRepetitions: o.MaxRepetitions,
		FixedA: o.Baseline, Family: family}
}

// Verdicts of an A/B row.
const (
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	// VerdictSame: the change's interval lies within ±noise floor.
	VerdictSame = "same"
	// VerdictUndecided: neither a change nor the same yet, at the
	// repetitions measured.
	VerdictUndecided = "undecided"
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
	// CVA and CVB are each side's coefficient of variation (standard
	// deviation / mean): the noise the verdict was reached at.
	CVA float64 `json:"cv_a"`
	CVB float64 `json:"cv_b"`
	// P is the p-value of the t test at the look that decided the row
	// (the last for an undecided one), and Level what it had to be below
	// there: alpha spent at that look and divided among the metrics still
	// open.
	P       float64 `json:"p"`
	Level   float64 `json:"level"`
	Verdict string  `json:"verdict"`
	// DecidedAt is the repetitions (of B against a baseline, a side
	// otherwise) at the look that decided the row.
	DecidedAt int `json:"decided_at,omitempty"`
	// RepetitionsA and RepetitionsB are how many repetitions the values
	// of each side came from: a group of several guests gives as many
	// values a repetition.
	RepetitionsA int `json:"repetitions_a"`
	RepetitionsB int `json:"repetitions_b"`
	// NeedsRepetitions, for an undecided row, is how many repetitions a
	// side (of B against a baseline) would likely decide it at the noise
	// measured; 0 when none would: a baseline too small to resolve the
	// noise floor.
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
	// Loads are A's and B's host loads during their steps; nil where the
	// caller did not read them.
	Loads [2]*HostLoad
	// Continue: some row is undecided and the comparison's looks are not
	// over, so more repetitions could decide it.
	Continue bool
}

type abKey struct{ group, workload, params, metric string }

// CompareRuns pairs the samples of two runs by guest group, workload,
// parameters and metric, and decides every pair at once (stats.Decide):
// the family the errors are bounded over is every metric A measured.
func CompareRuns(a store.Run, as []store.Sample, b store.Run, bs []store.Sample, o CompareOptions) ABComparison {
	c := ABComparison{A: a, B: b, Options: o}
	var order []abKey
	values := map[abKey]*[2][][]float64{}
	meta := map[abKey]store.Sample{}
	collect := func(side int, samples []store.Sample) {
		for _, s := range samples {
			k := abKey{s.Group, s.WorkloadID, paramString(s.Params), s.Metric}
			if values[k] == nil {
				values[k] = &[2][][]float64{}
				meta[k] = s
				order = append(order, k)
			}
			reps := &values[k][side]
			for len(*reps) <= s.Repetition {
				*reps = append(*reps, nil)
			}
			(*reps)[s.Repetition] = append((*reps)[s.Repetition], s.Value)
		}
	}
	collect(0, as)
	collect(1, bs)
	family := 0
	var metrics []stats.Metric
	var decided []int // rows decided by stats.Decide, in the order of metrics
	for _, k := range order {
		v, m := values[k], meta[k]
		flatA, flatB := slices.Concat(v[0]...), slices.Concat(v[1]...)
		row := ABRow{Group: k.group, WorkloadID: k.workload, Params: k.params, Metric: k.metric, Unit: m.Unit, Better: m.Better,
			A: stats.Summarize(flatA, stats.DefaultConfidence), B: stats.Summarize(flatB, stats.DefaultConfidence), P: 1,
			RepetitionsA: repetitions(v[0]), RepetitionsB: repetitions(v[1])}
		row.CVA, row.CVB = cv(row.A), cv(row.B)
		if len(flatA) > 0 {
			family++
		}
		switch {
		case len(flatB) == 0:
			row.Verdict = VerdictOnlyA
		case len(flatA) == 0:
			row.Verdict = VerdictOnlyB
		default:
			row.Change = stats.Normalize(row.B, row.A)
			decided = append(decided, len(c.Rows))
			metrics = append(metrics, stats.Metric{A: v[0], B: v[1]})
		}
		c.Rows = append(c.Rows, row)
	}
	res := stats.Decide(o.plan(family), metrics)
	c.Continue = res.Continue
	for i, out := range res.Metrics {
		r := &c.Rows[decided[i]]
		r.P, r.Level = out.P, out.Level
		r.Verdict = verdictOf(out.Decision, r.Better)
		if r.Verdict == VerdictUndecided {
			r.NeedsRepetitions = out.Needs
		} else {
			r.DecidedAt = out.Look
		}
	}
	return c
}

// repetitions counts the repetitions that gave values: a failed step
// leaves a hole.
func repetitions(reps [][]float64) int {
	n := 0
	for _, r := range reps {
		if len(r) > 0 {
			n++
		}
	}
	return n
}

// cv is a summary's coefficient of variation; 0 without a spread or a
// mean to relate it to.
func cv(s stats.Summary) float64 {
	if s.N < 2 || s.Mean == 0 {
		return 0
	}
	return s.Stddev / math.Abs(s.Mean)
}

// verdictOf names a decision by the metric's direction.
func verdictOf(d stats.Decision, better workload.Better) string {
	switch d {
	case stats.Same:
		return VerdictSame
	case stats.Undecided:
		return VerdictUndecided
	}
	if (d == stats.Higher) == (better != workload.LowerIsBetter) {
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
	fmt.Fprintf(w, "run %d (%s) → run %d (%s): %s\n", c.A.ID, termtext.Safe(c.A.ScenarioName), c.B.ID, termtext.Safe(c.B.ScenarioName), criteria(c.Options))
	rows := sortedABRows(c)
	table := [][]string{{"group", "workload / metric", "A", "B", "change", "cv A/B", "p", "verdict"}}
	verdicts := []int{0}
	for _, r := range rows {
		change, p, noise := "—", "—", "—"
		if r.Verdict != VerdictOnlyA && r.Verdict != VerdictOnlyB {
			change = changeText(r)
			p = fmt.Sprintf("%.3g", r.P)
			noise = cvText(r)
		}
		table = append(table, []string{r.Group, fmt.Sprintf("%s %s %s", r.WorkloadID, r.Metric, arrow(string(r.Better))),
			cellValue(r.A, r.Unit), cellValue(r.B, r.Unit), change, noise, p, verdictText(r)})
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
	for _, note := range append(undecidedNotes(c), abLoadNotes(c)...) {
		fmt.Fprintln(w, "note: "+note)
	}
	return w.err
}

// abLoadNotes says which side's host was busy, or not read: a change
// measured beside other work may be that work's.
func abLoadNotes(c ABComparison) []string {
	var notes []string
	for i, run := range []store.Run{c.A, c.B} {
		if note := loadNote(c.Loads[i]); note != "" {
			notes = append(notes, fmt.Sprintf("%c (run %d): %s", 'A'+i, run.ID, note))
		}
	}
	return notes
}

// criteria says in a line what the verdicts mean.
func criteria(o CompareOptions) string {
	return fmt.Sprintf("worse/better when significant (family-wise p < %g, Holm, spent over looks up to %d repetitions) and not within ±%.3g%%; same when the change's interval lies within ±%.3g%%",
		o.Alpha, o.MaxRepetitions, 100*o.NoiseFloor, 100*o.NoiseFloor)
}

// verdictText is a row's verdict with the repetitions that decided it.
func verdictText(r ABRow) string {
	if r.DecidedAt > 0 && (r.DecidedAt < r.RepetitionsB || r.DecidedAt < r.RepetitionsA) {
		return fmt.Sprintf("%s (at %d)", r.Verdict, r.DecidedAt)
	}
	return r.Verdict
}

// cvText is each side's coefficient of variation in percent.
func cvText(r ABRow) string {
	return fmt.Sprintf("%.2g%%/%.2g%%", 100*r.CVA, 100*r.CVB)
}

// undecidedNotes say, for the undecided rows, what could decide them: how
// many repetitions at the noise measured, or that none can against a
// baseline too small.
func undecidedNotes(c ABComparison) []string {
	type sizes struct{ repsA, repsB, needs int }
	count := map[sizes]int{}
	var order []sizes
	for _, r := range c.Rows {
		if r.Verdict != VerdictUndecided {
			continue
		}
		k := sizes{r.RepetitionsA, r.RepetitionsB, r.NeedsRepetitions}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	notes := make([]string, 0, len(order))
	for _, k := range order {
		what := fmt.Sprintf("%d metrics are", count[k])
		if count[k] == 1 {
			what = "1 metric is"
		}
		var can string
		switch {
		case k.needs == 0 && c.Options.Baseline:
			can = fmt.Sprintf("the baseline's %d repetitions are too few to resolve ±%.3g%% at its noise, whatever B measures: set a baseline of more repetitions",
				k.repsA, 100*c.Options.NoiseFloor)
		case k.needs == 0:
			can = "no number of repetitions would likely decide it at the noise measured"
		case c.Options.Baseline:
			can = fmt.Sprintf("about %d repetitions of a run would likely decide against the baseline at the noise measured", k.needs)
		default:
			can = fmt.Sprintf("about %d repetitions a side would likely decide at the noise measured", k.needs)
		}
		if k.needs > c.Options.MaxRepetitions {
			can += fmt.Sprintf(", more than the %d the looks allow (--max-repetitions)", c.Options.MaxRepetitions)
		}
		notes = append(notes, fmt.Sprintf("%s undecided after %d and %d repetitions: %s.", what, k.repsA, k.repsB, can))
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
		LoadA   *HostLoad      `json:"host_load_a,omitempty"`
		LoadB   *HostLoad      `json:"host_load_b,omitempty"`
	}{c.A.ID, c.B.ID, c.Options, c.Rows, c.Loads[0], c.Loads[1]})
}
