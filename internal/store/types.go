package store

import (
	"encoding/json"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// Run statuses. A run starts as Running and ends in one of the others; in
// every case the samples it measured are kept. docs/results.md lists them
// with the exit status of `vfleet run` for each.
const (
	StatusRunning = "running"
	// StatusComplete: every step was measured.
	StatusComplete = "complete"
	// StatusCompleteWithFailures: the run went to its end, but some steps
	// or guests failed; their errors are stored as failures.
	StatusCompleteWithFailures = "complete with failures"
	// StatusIncomplete: the user interrupted the run (SIGINT, SIGTERM).
	StatusIncomplete = "incomplete"
	// StatusFailed: the run could not go on: no guest started, its network
	// could not be built, or the results store stopped taking samples.
	StatusFailed = "failed"
	// StatusAborted: the vfleet that ran it died without finishing it, as
	// found later by `vfleet clean` or another run.
	StatusAborted = "aborted"
)

// Statuses lists every status, for metrics and documentation.
var Statuses = []string{StatusRunning, StatusComplete, StatusCompleteWithFailures, StatusIncomplete, StatusFailed, StatusAborted}

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
	StatusReason   string // why it ended as it did, when not complete
	// Key names the run's resources and ledger; Owner is the process
	// running it, zero once a long-lived fleet's launcher has handed it over.
	Key   string
	Owner procfs.Process
	Host  hostinfo.Fingerprint
	// Guests maps a guest name to what it was (kind, runtime, boot time...),
	// as JSON-serialisable data supplied by the runner.
	Guests map[string]GuestRecord
	// Dropped are the scenario's optional guest groups this host could not
	// run, which the run went without.
	Dropped []DroppedGroup
	// Origin is where the run was measured when not on this store's host
	// (the machine or the file it was imported from), empty for a run of
	// this host.
	Origin string
}

// DroppedGroup is an optional guest group the host refused, and why.
type DroppedGroup struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Runtime string `json:"runtime,omitempty"`
	Reason  string `json:"reason"`
}

// What names the group's technology: its kind, and its runtime when one
// is named.
func (d DroppedGroup) What() string {
	if d.Runtime == "" {
		return d.Kind
	}
	return d.Kind + " " + d.Runtime
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

// The details of a remote network peer's record (GuestRecord.Details of
// the guest named "peer", kind "remote"): which machine, its host key, and
// its hostinfo.Fingerprint as JSON, as Run.Host is the host's.
const (
	DetailPeerURL         = "peer.url"
	DetailPeerHostKey     = "peer.host_key"
	DetailPeerFingerprint = "peer.fingerprint"
)

// peerGuest names the network peer among a run's guests
// (scenario.PeerName, which the store cannot import).
const peerGuest = "peer"

// RemotePeer is the run's remote network peer: its URL and fingerprint;
// false when the run had none (or a record without its fingerprint).
func (r Run) RemotePeer() (string, hostinfo.Fingerprint, bool) {
	var fp hostinfo.Fingerprint
	d := r.Guests[peerGuest].Details
	if d[DetailPeerURL] == "" || json.Unmarshal([]byte(d[DetailPeerFingerprint]), &fp) != nil {
		return "", fp, false
	}
	return d[DetailPeerURL], fp, true
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
