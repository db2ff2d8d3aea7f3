package scenario

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vfleet/vfleet/internal/workload"
)

// ErrInvalid is matched (errors.Is) by every validation error.
var ErrInvalid = errors.New("invalid scenario")

// FieldError is one problem at one place of a scenario file.
type FieldError struct {
	Source string
	Line   int
	Column int
	Path   string // e.g. guests[1].count
	Msg    string
	Err    error // a further class of the problem (ErrTooLarge), if any
}

func (e *FieldError) Error() string {
	loc := e.Source
	switch {
	case e.Line > 0 && e.Column > 0:
		loc = fmt.Sprintf("%s:%d:%d", e.Source, e.Line, e.Column)
	case e.Line > 0: // YAML syntax errors come with a line only
		loc = fmt.Sprintf("%s:%d", e.Source, e.Line)
	}
	if e.Path == "" {
		return loc + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Path, e.Msg)
}

func (e *FieldError) Is(target error) bool {
	return target == ErrInvalid || e.Err != nil && errors.Is(e.Err, target)
}

// ErrorList holds every problem found in one file.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	if len(l) == 1 {
		return msgs[0]
	}
	return fmt.Sprintf("%d problems in scenario:\n  %s", len(l), strings.Join(msgs, "\n  "))
}

func (l ErrorList) Is(target error) bool { return target == ErrInvalid }

// Unwrap exposes the individual errors to errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// clippedError is an error that names a user's value (the scenario's
// path), its words clipped as those of a FieldError are; it matches what
// it wraps.
type clippedError struct{ err error }

func (e clippedError) Error() string { return workload.ClipWords(e.err.Error()) }
func (e clippedError) Unwrap() error { return e.err }

// suggest returns the known name closest to s, if it is close enough to be
// a likely typo.
func suggest(s string, known []string) string {
	if len(s) > workload.MaxQuoted {
		return "" // no name is that long; and the distance would take long
	}
	// Two edits (one transposition) are always a plausible typo; longer
	// names may stray further. Beyond that a suggestion would be a guess
	// ("nope" is not "cpu").
	best, bestDist := "", max(2, len(s)/3)+1
	for _, k := range known {
		if d := editDistance(s, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
