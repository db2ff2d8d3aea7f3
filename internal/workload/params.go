package workload

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrBadParam is wrapped by every parameter validation error.
	ErrBadParam = errors.New("bad workload parameter")
	// ErrParse is wrapped when a tool's output lacks the expected figures.
	ErrParse = errors.New("cannot parse tool output")
)

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
			return fmt.Errorf("%w: %s has no parameter %q (known: %s)", ErrBadParam, w.Name(), k, strings.Join(keys, ", "))
		}
	}
	return nil
}

// intParam reads a whole number in [min, max].
func intParam(p Params, key string, min, max int) (int, error) {
	v, err := strconv.Atoi(p[key])
	if err != nil || v < min || v > max {
		return 0, fmt.Errorf("%w: %s = %q: want a whole number from %d to %d", ErrBadParam, key, p[key], min, max)
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
	return "", fmt.Errorf("%w: %s = %q: allowed: %s", ErrBadParam, key, p[key], strings.Join(allowed, ", "))
}

var sizeRE = regexp.MustCompile(`^[1-9][0-9]*[kKmMgG]?$`)

// sizeParam reads a size in fio's notation (4k, 128M, 1G).
func sizeParam(p Params, key string) (string, error) {
	if !sizeRE.MatchString(p[key]) {
		return "", fmt.Errorf("%w: %s = %q: want a size like 4k, 128M or 1G", ErrBadParam, key, p[key])
	}
	return p[key], nil
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
