package store

import (
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// Run statuses. A run starts as Running; it ends Complete when every step
// ran, or Incomplete when it was interrupted (its samples are kept).
const (
	StatusRunning    = "running"
	StatusComplete   = "complete"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed" // could not start at all (no guest came up)
)

// Run is one execution of a scenario.
type Run struct {
	ID             int64
	ScenarioName   string
	ScenarioSource string
	ScenarioText   []byte
	ScenarioHash   string // hex sha256 of ScenarioText
	Baseline       string // guest group every value is normalised to
	Started        time.Time
	Finished       time.Time // zero while running
	Status         string
	Host           hostinfo.Fingerprint
	// Guests maps a guest name to what it was (kind, runtime, boot time...),
	// as JSON-serialisable data supplied by the runner.
	Guests map[string]GuestRecord
}

// GuestRecord is what the store keeps about one guest of a run.
type GuestRecord struct {
	Group    string            `json:"group"`
	Kind     string            `json:"kind"`
	Runtime  string            `json:"runtime,omitempty"`
	CPUs     string            `json:"cpus,omitempty"`
	Memory   int64             `json:"memory_bytes,omitempty"`
	CPULimit float64           `json:"cpu_limit,omitempty"`
	BootNS   int64             `json:"boot_ns"`
	Details  map[string]string `json:"details,omitempty"`
}

// Sample is one raw measured value with every dimension it was measured under.
type Sample struct {
	RunID      int64
	Guest      string
	Group      string
	Kind       string
	Runtime    string
	WorkloadID string
	Workload   string
	Params     workload.Params
	Repetition int
	Metric     string
	Unit       string
	Value      float64
	Better     workload.Better
	At         time.Time
	WallNS     int64 // the execution's wall time
	CPUNS      int64 // user+sys CPU time of the execution, from rusage
	// Hist is the distribution Value summarises (every latency observation
	// of the execution), nil for a scalar. Reports merge the histograms of
	// a group's executions for its percentiles.
	Hist *stats.Histogram
}

// Failure records a step that did not produce samples.
type Failure struct {
	RunID      int64
	Guest      string
	Group      string
	WorkloadID string
	Repetition int
	Error      string
	Stderr     string
	At         time.Time
}
