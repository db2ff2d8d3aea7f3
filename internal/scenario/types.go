package scenario

import (
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/workload"
)

// Spec is a parsed and validated scenario file. It is plain data.
type Spec struct {
	Name        string
	Description string
	// Source is where the scenario came from (a path, or "builtin:NAME"),
	// used in error messages and stored with the run.
	Source string
	// Text is the scenario file's exact bytes; stored with the run and hashed.
	Text        []byte
	Repetitions int
	Warmup      int // discarded executions per guest and workload before the measured ones
	Duration    time.Duration
	Baseline    string // name of the guest group every value is normalised to
	Guests      []GuestGroup
	Workloads   []WorkloadEntry
}

// GuestGroup is one `guests:` entry; Count guests are made from it.
type GuestGroup struct {
	Name        string
	Kind        string
	Runtime     string
	CPUs        string
	MemoryBytes int64
	CPULimit    float64
	Count       int
}

// WorkloadEntry is one `workloads:` entry.
type WorkloadEntry struct {
	ID       string // unique label; defaults to Workload
	Workload string // registry name
	Params   workload.Params
	Duration time.Duration // overrides Spec.Duration when non-zero
}

// Plan is a Spec expanded into the guests to start and the ordered steps to run.
type Plan struct {
	Spec   *Spec
	Guests []PlannedGuest
	Steps  []Step
}

// PlannedGuest is one guest to start, with the group it came from.
type PlannedGuest struct {
	Group string
	Spec  guest.Spec
}

// Step is one execution of one workload in one guest.
type Step struct {
	Guest      string // PlannedGuest.Spec.Name
	Group      string
	WorkloadID string
	Workload   string
	Params     workload.Params // fully resolved: defaults merged with the entry's
	Duration   time.Duration
	Repetition int  // 0-based among measured steps; warm-ups count separately
	Warmup     bool // the result is discarded
}
