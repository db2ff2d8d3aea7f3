package scenario

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/workload"
)

// Bounds on what a scenario may ask for, so that a mistake (a count with
// three zeros too many, a device given as the file) is an error naming the
// limit instead of minutes of work or an out-of-memory crash.
const (
	// MaxFileBytes bounds a scenario file; the largest built-in is 3 KiB.
	MaxFileBytes = 1 << 20
	// MaxGuests bounds the guests a scenario starts at once, all groups
	// together: as many as one group may hold.
	MaxGuests = MaxCount
	// MaxSteps bounds the steps of a plan: at a second each, a day.
	MaxSteps = 100_000
)

// ErrTooLarge is matched by the errors of a scenario over these bounds.
var ErrTooLarge = errors.New("scenario too large")

// readFile reads a scenario file, refusing anything that is not a regular
// file (a device such as /dev/zero would never end, a named pipe would
// block) before reading it, or is over MaxFileBytes. The limit is enforced
// on what is read, not on what stat said, so a file growing meanwhile
// cannot get past it.
func readFile(path string) ([]byte, error) {
	f, _, err := regfile.Open(path)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, fmt.Errorf("scenario %w: give a YAML file or a built-in scenario's name", err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read scenario %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("scenario %s: %w: over %d KiB (a scenario file is a few KiB)", path, ErrTooLarge, MaxFileBytes>>10)
	}
	return data, nil
}

// plannedSize counts the guests and the steps Expand would make, without
// making them. The step count is a float64 so that repetitions in the
// billions cannot overflow it; it only has to be compared with MaxSteps.
func (s *Spec) plannedSize() (guests int, steps float64) {
	fixed := 0
	for _, g := range s.Guests {
		guests += g.Count
		if !s.noiseGroup(g.Name) && !s.scaled(g) {
			fixed += g.Count
		}
	}
	if s.Noise != nil && s.Noise.On == NoiseOnHost {
		guests++
	}
	sizes := []int{0}
	if s.Fleet != nil && len(s.Fleet.Scale) > 0 {
		sizes = s.Fleet.Scale
	}
	modes := []string{ModeAlone}
	if s.Fleet != nil && len(s.Fleet.Modes) > 0 {
		modes = s.Fleet.Modes
	}
	profiles := 1
	if s.Noise != nil {
		profiles = len(s.Noise.Profiles)
	}
	rounds := float64(s.Warmup) + float64(s.Repetitions)
	// A phase's scaled groups: all of them, or one at a time when apart.
	scaledGroups := 0
	for _, g := range s.Guests {
		if s.scaled(g) {
			scaledGroups++
		}
	}
	phasesPerSize, groupsPerPhase := 1, scaledGroups
	if s.Fleet != nil && s.Fleet.GroupsApart {
		phasesPerSize, groupsPerPhase = scaledGroups, 1
	}
	for _, size := range sizes {
		measured := fixed + groupsPerPhase*size
		perRound := 0
		for _, m := range modes {
			if m == ModeTogether {
				perRound++
			} else {
				perRound += measured
			}
		}
		steps += float64(phasesPerSize) * float64(len(s.Workloads)) * rounds * float64(profiles) * float64(perRound)
	}
	return guests, steps
}

// checkSize refuses a scenario that would start more than MaxGuests
// guests or run more than MaxSteps steps, saying how many it would make.
func (p *parser) checkSize(s *Spec) {
	guests, steps := s.plannedSize()
	if guests > MaxGuests {
		p.errs = append(p.errs, &FieldError{Source: p.source, Path: "guests", Err: ErrTooLarge,
			Msg: fmt.Sprintf("the scenario would start %d guests; at most %d are allowed", guests, MaxGuests)})
	}
	if steps > MaxSteps {
		p.errs = append(p.errs, &FieldError{Source: p.source, Path: "workloads", Err: ErrTooLarge,
			Msg: fmt.Sprintf("the plan would have %.0f steps (workloads × repetitions and warm-ups × guests); at most %d are allowed", steps, MaxSteps)})
	}
}

// clipValues clips what format quotes of the user's values, which may be
// a megabyte long: a string quoted whole (%q) to its first MaxQuoted
// runes, and each word of the others (a path in a sentence, an error that
// names one), so that vfleet's own words around them, such as the list of
// what is allowed, stay whole.
func clipValues(format string, args []any) []any {
	out := append([]any(nil), args...)
	arg := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
			i++
		}
		if i >= len(format) || format[i] == '%' {
			continue
		}
		if arg < len(out) {
			switch v := out[arg].(type) {
			case string:
				if format[i] == 'q' {
					out[arg] = workload.Clip(v)
				} else {
					out[arg] = workload.ClipWords(v)
				}
			case error:
				out[arg] = workload.ClipWords(v.Error())
			}
		}
		arg++
	}
	return out
}
