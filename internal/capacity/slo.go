package capacity

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Scope says which figure of a fleet size an SLO bounds.
type Scope string

const (
	// ScopeEvery bounds the worst guest: the SLO must hold for each one.
	ScopeEvery Scope = "every"
	// ScopeMedian bounds the median guest.
	ScopeMedian Scope = "median"
	// ScopeTotal bounds the sum over the guests, the fleet's aggregate.
	ScopeTotal Scope = "total"
)

var scopes = []Scope{ScopeEvery, ScopeMedian, ScopeTotal}

// SLO is one service-level objective a fleet size must meet.
type SLO struct {
	// Text is the expression as given, for messages.
	Text  string
	Scope Scope
	// WorkloadID and Metric name the samples: the scenario's workload
	// entry and what its tool reports, as reports write them
	// (WORKLOAD_ID.METRIC).
	WorkloadID string
	Metric     string
	// AtLeast is true for >=, false for <=.
	AtLeast bool
	// Bound is in the metric's unit, or in seconds when Duration is set.
	Bound float64
	// Duration marks a bound given with a time unit (500us): it is
	// compared with a metric reported in a time unit, whatever that unit.
	Duration bool
	// Alone makes the bound a ratio to the same figure of one guest of
	// the group measured alone (fleet size 1).
	Alone bool
}

// Name is WORKLOAD_ID.METRIC.
func (s SLO) Name() string { return s.WorkloadID + "." + s.Metric }

// holds tells whether a value meets the bound.
func (s SLO) holds(v float64) bool {
	if s.AtLeast {
		return v >= s.Bound
	}
	return v <= s.Bound
}

// ErrSLO is matched (errors.Is) by every error in an SLO expression.
var ErrSLO = errors.New("invalid SLO")

// SLOError is one problem at one place of an SLO expression.
type SLOError struct {
	Expr   string
	Column int // 1-based, in characters
	Msg    string
}

func (e *SLOError) Error() string {
	return fmt.Sprintf("--slo %q: column %d: %s", e.Expr, e.Column, e.Msg)
}

func (e *SLOError) Is(target error) bool { return target == ErrSLO }

// Catalog is what a scenario can produce: its workload entries' IDs, each
// with the metrics its workload reports. A workload whose metrics are
// only known once it ran has none listed; its metric names are checked
// against the first size measured (CheckMeasured).
type Catalog map[string][]string

// names lists the catalog for messages: every WORKLOAD_ID.METRIC, and
// WORKLOAD_ID.* for a workload whose metrics are not known beforehand.
func (c Catalog) names() string {
	var out []string
	for id, metrics := range c {
		if len(metrics) == 0 {
			out = append(out, id+".*")
		}
		for _, m := range metrics {
			out = append(out, id+"."+m)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Grammar, for messages and docs.
const Grammar = "[every|median|total] WORKLOAD_ID.METRIC >=|<= NUMBER[%|ns|us|ms|s] [alone]"

// ParseSLO reads one expression:
//
//	[every|median|total] WORKLOAD_ID.METRIC >=|<= NUMBER[%|ns|us|ms|s] [alone]
//
// The scope defaults to every. A percentage is a fraction (80% = 0.8); a
// time unit makes the bound a duration. The metric must be one the
// catalog lists.
func ParseSLO(expr string, c Catalog) (SLO, error) {
	s := SLO{Text: expr, Scope: ScopeEvery}
	toks := tokenize(expr)
	fail := func(col int, format string, args ...any) (SLO, error) {
		return SLO{}, &SLOError{Expr: expr, Column: col, Msg: fmt.Sprintf(format, args...)}
	}
	end := utf8.RuneCountInString(expr) + 1
	i := 0
	next := func() (token, bool) {
		if i >= len(toks) {
			return token{col: end}, false
		}
		i++
		return toks[i-1], true
	}
	t, ok := next()
	if !ok {
		return fail(end, "empty: want %s", Grammar)
	}
	for _, sc := range scopes {
		if t.text == string(sc) {
			s.Scope = sc
			t, ok = next()
			break
		}
	}
	id, metric, dotted := strings.Cut(t.text, ".")
	switch {
	case !ok:
		return fail(t.col, "want a metric, WORKLOAD_ID.METRIC, after the scope; the scenario can produce %s", c.names())
	case !dotted || id == "" || metric == "":
		return fail(t.col, "%q is not WORKLOAD_ID.METRIC; the scenario can produce %s", t.text, c.names())
	}
	known, isWorkload := c[id]
	switch {
	case !isWorkload:
		return fail(t.col, "the scenario has no workload %q; it can produce %s", id, c.names())
	case len(known) > 0 && !slices.Contains(known, metric):
		return fail(t.col+len(id)+1, "workload %s reports no metric %q; the scenario can produce %s", id, metric, c.names())
	}
	s.WorkloadID, s.Metric = id, metric
	t, ok = next()
	switch {
	case t.text == ">=":
		s.AtLeast = true
	case t.text == "<=":
	case !ok:
		return fail(t.col, "want >= or <= after the metric")
	default:
		return fail(t.col, "%q is not a comparison: want >= or <=", t.text)
	}
	t, ok = next()
	if !ok {
		return fail(t.col, "want a number after the comparison")
	}
	bound, duration, err := parseBound(t.text)
	if err != nil {
		return fail(t.col, "%q is not a bound: %v", t.text, err)
	}
	s.Bound, s.Duration = bound, duration
	if t, ok = next(); ok {
		if t.text != "alone" {
			return fail(t.col, "%q is not allowed here: want alone (a ratio to one guest measured alone) or nothing", t.text)
		}
		s.Alone = true
		if s.Duration {
			return fail(t.col, "a bound relative to alone is a ratio; it takes no time unit")
		}
	}
	if t, ok = next(); ok {
		return fail(t.col, "unexpected %q after the end of the expression", t.text)
	}
	return s, nil
}

type token struct {
	text string
	col  int // 1-based
}

// tokenize splits an expression into words and comparisons, so that
// `x>=2` reads as `x >= 2`.
func tokenize(expr string) []token {
	var toks []token
	var cur strings.Builder
	start := 0
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, token{cur.String(), start})
			cur.Reset()
		}
	}
	runes := []rune(expr)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case unicode.IsSpace(r):
			flush()
		case r == '<' || r == '>' || r == '=' || r == '!':
			flush()
			op := string(r)
			if i+1 < len(runes) && runes[i+1] == '=' {
				op += "="
				i++
			}
			toks = append(toks, token{op, i + 1 - (len(op) - 1)})
		default:
			if cur.Len() == 0 {
				start = i + 1
			}
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// timeUnits are the durations a bound may be given in, in seconds.
var timeUnits = map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1}

// parseBound reads a number with an optional unit: % (a fraction) or a
// time unit (the bound is then in seconds).
func parseBound(text string) (float64, bool, error) {
	num := strings.TrimRightFunc(text, func(r rune) bool { return unicode.IsLetter(r) || r == '%' })
	unit := text[len(num):]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, errors.New("want a finite number, optionally followed by %, ns, us, ms or s")
	}
	switch scale, isTime := timeUnits[unit]; {
	case unit == "":
		return v, false, nil
	case unit == "%":
		return v / 100, false, nil
	case isTime:
		return v * scale, true, nil
	default:
		return 0, false, fmt.Errorf("unknown unit %q: want %%, ns, us, ms or s", unit)
	}
}

// inSeconds converts a value reported in unit to seconds; false when the
// unit is not a time.
func inSeconds(v float64, unit string) (float64, bool) {
	scale, ok := timeUnits[unit]
	return v * scale, ok
}
