package workload

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

var (
	// ErrBadParam is wrapped by every parameter validation error.
	ErrBadParam = errors.New("bad workload parameter")
	// ErrParse is wrapped when a tool's output lacks the expected figures.
	ErrParse = errors.New("cannot parse tool output")
)

// MaxQuoted bounds how much of a user's value an error quotes: a value
// may be a megabyte long, and the message must stay readable.
const MaxQuoted = 60

// Clip shortens a value quoted in an error to its first MaxQuoted runes.
func Clip(v string) string {
	r := []rune(v)
	if len(r) <= MaxQuoted {
		return v
	}
	return string(r[:MaxQuoted]) + "…"
}

// ClipWords clips each word of s (a run without white space) to its first
// MaxQuoted runes: a message that embeds a user's value, such as a path,
// stays readable while the short words around it are kept whole.
func ClipWords(s string) string {
	var b strings.Builder
	word := -1 // start of the current word, or -1 between words
	for i, r := range s + " " {
		switch {
		case !unicode.IsSpace(r) && word < 0:
			word = i
		case unicode.IsSpace(r) && word >= 0:
			w := s[word:i]
			// A value clipped already, quoted and followed by a comma,
			// stays as it is.
			if !strings.Contains(w, "…") || utf8.RuneCountInString(w) > MaxQuoted+4 {
				w = Clip(w)
			}
			b.WriteString(w)
			word = -1
		}
		if unicode.IsSpace(r) && i < len(s) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkKeys rejects parameters the workload does not define.
func checkKeys(w Workload, p Params) error {
	defaults := w.Defaults()
	for k := range p {
		if _, ok := defaults[k]; !ok {
			keys := make([]string, 0, len(defaults))
			for d := range defaults {
				keys = append(keys, d)
			}
			sort.Strings(keys)
			return fmt.Errorf("%w: %s has no parameter %q (known: %s)", ErrBadParam, w.Name(), Clip(k), strings.Join(keys, ", "))
		}
	}
	return nil
}

// intParam reads a whole number in [min, max].
func intParam(p Params, key string, min, max int) (int, error) {
	v, err := strconv.Atoi(p[key])
	if err != nil || v < min || v > max {
		return 0, fmt.Errorf("%w: %s = %q: want a whole number from %d to %d", ErrBadParam, key, Clip(p[key]), min, max)
	}
	return v, nil
}

// enumParam reads one of the allowed values.
func enumParam(p Params, key string, allowed ...string) (string, error) {
	for _, a := range allowed {
		if p[key] == a {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: %s = %q: allowed: %s", ErrBadParam, key, Clip(p[key]), strings.Join(allowed, ", "))
}

var sizeRE = regexp.MustCompile(`^([1-9][0-9]*)([kKmMgG]?)$`)

// sizeParam reads a size in fio's notation (4k, 128M, 1G: powers of 1024,
// fio's default) and returns it in bytes, which must be at most max: a
// number the tool cannot hold would fail only once guests are up.
func sizeParam(p Params, key string, max int64) (int64, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s = %q: %s", ErrBadParam, key, Clip(p[key]), why)
	}
	m := sizeRE.FindStringSubmatch(p[key])
	if m == nil {
		return 0, bad("want a size like 4k, 128M or 1G")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30}[strings.ToLower(m[2])]
	if err != nil || n > max>>shift {
		return 0, bad(fmt.Sprintf("want at most %s", formatSize(max)))
	}
	return n << shift, nil
}

// formatSize writes a size in the largest of fio's units that divides it.
func formatSize(b int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"G", 30}, {"M", 20}, {"k", 10}} {
		if b>>u.shift > 0 && b&(1<<u.shift-1) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// seconds renders a duration as whole seconds, at least one: every tool
// here takes its run time in seconds.
func seconds(d time.Duration) int {
	s := int(d.Round(time.Second) / time.Second)
	if s < 1 {
		return 1
	}
	return s
}

// timeoutFor bounds an execution meant to last d: tools set up and tear
// down (fio lays out its file), and a machine under load is slow.
func timeoutFor(d time.Duration) time.Duration { return 2*d + 30*time.Second }

// excerpt shortens output for an error message, on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + " …"
	}
	if s == "" {
		return "(no output)"
	}
	return s
}

// MinDurationer is implemented by workloads that cannot measure in less
// than some time; scenario validation rejects shorter durations.
type MinDurationer interface {
	MinDuration() time.Duration
}
