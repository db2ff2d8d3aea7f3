// Package archive carries runs between stores: Export writes runs with
// everything the store keeps about them (samples with their histograms,
// failures, audits, provenance) into one portable file, Import reads such
// a file into another store.
//
// The file is gzip'd JSON Lines. The first line is a header naming the
// format, its version, the store schema its runs are of (the newest that
// changed what a run carries, not the whole store's: a migration of
// another table leaves files readable by the vfleet before it), the
// vfleet that wrote it, and how many runs follow; then each run is a run record (which says how many
// sample, failure, audit and load records follow it) and those records in the
// order the store keeps them; the last line is a trailer with the counts
// and the sha256 of every line before it. Nothing in the file is an id of
// the store it came from: a run is known by its key. The output is
// deterministic (no name or time in the gzip header, fields in a fixed
// order, floats in their shortest exact form, NaN and the infinities as
// strings, text that is not UTF-8 as base64), so a run exported, imported
// and exported again gives the same bytes.
package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// Format names the file format in its header.
const Format = "vfleet-runs"

// FormatVersion is the version of the file format this vfleet writes and
// the newest it reads.
const FormatVersion = 1

var (
	// ErrNotArchive is returned for a file that is not a vfleet runs file.
	ErrNotArchive = errors.New("not a vfleet runs file")
	// ErrTooNew is returned for a file written by a newer vfleet: its
	// format, or the store schema of its runs, is newer than this
	// vfleet's.
	ErrTooNew = errors.New("runs file is newer than this vfleet")
	// ErrCorrupt is returned for a file that is truncated, damaged or
	// altered: nothing of it is imported.
	ErrCorrupt = errors.New("runs file is damaged")
	// ErrTooLarge is returned for a file announcing or holding more than
	// an import takes (MaxRunRecords, MaxRecords, MaxDecoded): refused
	// before it is held, whatever its sum.
	ErrTooLarge = errors.New("runs file is larger than an import takes")
	// ErrCannotImport is returned for a whole file holding a run the store
	// refuses (store.ErrInvalidRun): one still running, or whose scenario
	// hash or JSON a store could not have written. Its sum may well match:
	// what wrote it, not the file, is at fault.
	ErrCannotImport = errors.New("cannot be imported")
	// ErrRunning is returned when asked to export a run that has not
	// ended: it may still gain samples, and its status would stay running
	// in the store it is carried to, where nothing would ever end it.
	ErrRunning = errors.New("run is still running")
)

// header is the file's first line.
type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Schema  int    `json:"schema"` // of the runs: store.CarriedSchemaVersion
	Vfleet  string `json:"vfleet"`
	Runs    int    `json:"runs"`
}

// record is every line after the header: exactly one of its fields is set.
type record struct {
	Run     *runRecord     `json:"run,omitempty"`
	Sample  *sampleRecord  `json:"sample,omitempty"`
	Failure *failureRecord `json:"failure,omitempty"`
	Audit   *auditRecord   `json:"audit,omitempty"`
	Load    *loadRecord    `json:"load,omitempty"`
	End     *trailer       `json:"end,omitempty"`
}

type runRecord struct {
	Key            text            `json:"key"`
	Origin         text            `json:"origin"`
	ScenarioName   text            `json:"scenario_name"`
	ScenarioSource text            `json:"scenario_source"`
	ScenarioText   text            `json:"scenario_text"`
	ScenarioHash   text            `json:"scenario_hash"`
	Baseline       text            `json:"baseline"`
	StartedNS      int64           `json:"started_ns"`
	FinishedNS     int64           `json:"finished_ns"`
	Status         text            `json:"status"`
	StatusReason   text            `json:"status_reason"`
	Host           json.RawMessage `json:"host"`
	Guests         json.RawMessage `json:"guests"`
	Dropped        json.RawMessage `json:"dropped"`
	// The records that follow the run, in this order.
	Samples  int `json:"samples"`
	Failures int `json:"failures"`
	Audits   int `json:"audits"`
	// Loads are absent in files of runs whose load was not read, and in
	// every file before it was: a run without keys of its own keeps the
	// key derived from its record.
	Loads int `json:"loads,omitempty"`
}

type sampleRecord struct {
	Guest      text            `json:"guest"`
	Group      text            `json:"group"`
	Kind       text            `json:"kind"`
	Runtime    text            `json:"runtime"`
	WorkloadID text            `json:"workload_id"`
	Workload   text            `json:"workload"`
	Params     json.RawMessage `json:"params"`
	Repetition int             `json:"repetition"`
	Metric     text            `json:"metric"`
	Unit       text            `json:"unit"`
	Value      number          `json:"value"`
	Better     text            `json:"better"`
	AtNS       int64           `json:"at_ns"`
	WallNS     int64           `json:"wall_ns"`
	CPUNS      int64           `json:"cpu_ns"`
	Hist       json.RawMessage `json:"hist,omitempty"`
}

type failureRecord struct {
	Guest      text  `json:"guest"`
	Group      text  `json:"group"`
	WorkloadID text  `json:"workload_id"`
	Repetition int   `json:"repetition"`
	Error      text  `json:"error"`
	Stderr     text  `json:"stderr"`
	AtNS       int64 `json:"at_ns"`
}

type auditRecord struct {
	Guest    text            `json:"guest"`
	Group    text            `json:"group"`
	Kind     text            `json:"kind"`
	Evidence json.RawMessage `json:"evidence"`
	AtNS     int64           `json:"at_ns"`
}

// loadRecord is the host's load during one step (store.StepLoad).
type loadRecord struct {
	Guest      text  `json:"guest"`
	WorkloadID text  `json:"workload_id"`
	Repetition int   `json:"repetition"`
	StartedNS  int64 `json:"started_ns"`
	WallNS     int64 `json:"wall_ns"`
	CPUs       int   `json:"cpus"`
	TotalTicks int64 `json:"total_ticks"`
	TaskTicks  int64 `json:"task_ticks"`
	StealTicks int64 `json:"steal_ticks"`
	OwnNS      int64 `json:"own_ns"`
}

// trailer is the file's last line.
type trailer struct {
	Runs     int    `json:"runs"`
	Samples  int    `json:"samples"`
	Failures int    `json:"failures"`
	Audits   int    `json:"audits"`
	Loads    int    `json:"loads,omitempty"` // absent before steps' loads were carried
	SHA256   string `json:"sha256"`          // hex, of every line before this one
}

// text is a string the store keeps as given, which may not be UTF-8 (a
// tool's stderr cut anywhere): JSON strings hold UTF-8 only, so any other
// is written as {"base64": "..."} and read back byte for byte.
type text string

type base64Text struct {
	Base64 []byte `json:"base64"`
}

func (t text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(base64Text{[]byte(t)})
}

func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = text(s)
		return nil
	}
	var v base64Text
	if err := strictDecode(b, &v); err != nil {
		return err
	}
	*t = text(v.Base64)
	return nil
}

// number is a sample value: a JSON number when it is finite, else one of
// the strings "NaN", "+Inf" and "-Inf", which JSON has no numbers for.
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	v := float64(n)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(v)
}

func (n *number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN":
			*n = number(math.NaN())
		case "+Inf":
			*n = number(math.Inf(1))
		case "-Inf":
			*n = number(math.Inf(-1))
		default:
			return fmt.Errorf("value %s: want a number, \"NaN\", \"+Inf\" or \"-Inf\"", strconv.Quote(s))
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*n = number(v)
	return nil
}

// strictDecode decodes one JSON value, refusing fields the type does not
// have and anything after the value: a file of this format's version
// holds nothing this vfleet does not know.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}
