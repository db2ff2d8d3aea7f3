package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// Format is an output format of `vfleet report`.
type Format string

const (
	FormatTable Format = "table"
	FormatHTML  Format = "html"
	FormatJSON  Format = "json"
	FormatCSV   Format = "csv"
)

// ErrUnknownFormat is returned by ParseFormat.
var ErrUnknownFormat = errors.New("unknown report format")

// Formats lists every format, in the order help texts show them.
func Formats() []Format { return []Format{FormatTable, FormatHTML, FormatJSON, FormatCSV} }

// ParseFormat reads a format name.
func ParseFormat(s string) (Format, error) {
	formats := Formats()
	allowed := make([]string, len(formats))
	for i, f := range formats {
		if Format(s) == f {
			return f, nil
		}
		allowed[i] = string(f)
	}
	return "", fmt.Errorf("%w %q (allowed: %s)", ErrUnknownFormat, s, strings.Join(allowed, ", "))
}

// csvFixedColumns are the dimensions every sample has; params follow as
// param_<name> columns, documented in docs/results.md.
var csvFixedColumns = []string{"run_id", "guest", "group", "kind", "runtime", "workload_id", "workload",
	"repetition", "metric", "unit", "value", "better", "at", "wall_ns", "cpu_ns", "role"}

// WriteCSV writes one row per raw sample with every dimension as a column.
func WriteCSV(w io.Writer, samples []store.Sample) error {
	paramSet := map[string]bool{}
	for _, s := range samples {
		for k := range s.Params {
			paramSet[k] = true
		}
	}
	params := sortedStrings(paramSet)
	cw := csv.NewWriter(w)
	header := append([]string{}, csvFixedColumns...)
	for _, p := range params {
		header = append(header, "param_"+p)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, s := range samples {
		rec := []string{strconv.FormatInt(s.RunID, 10), s.Guest, s.Group, s.Kind, s.Runtime, s.WorkloadID, s.Workload,
			strconv.Itoa(s.Repetition), s.Metric, s.Unit, strconv.FormatFloat(s.Value, 'g', -1, 64), string(s.Better),
			s.At.UTC().Format(time.RFC3339Nano), strconv.FormatInt(s.WallNS, 10), strconv.FormatInt(s.CPUNS, 10),
			string(workload.RoleOf(s.Workload, s.Metric))}
		for _, p := range params {
			rec = append(rec, s.Params[p])
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonReport is the JSON export: the run, its summaries and every sample.
// Names are snake_case throughout, as in the CSV.
type jsonReport struct {
	Run     jsonRun        `json:"run"`
	Columns []Column       `json:"columns"`
	Index   []jsonEstimate `json:"overhead_index"` // parallel to columns
	// Footprint is null for a run without launch and density rows.
	Footprint []jsonEstimate `json:"footprint_index"`
	Rows      []Row          `json:"rows"`
	NonFinite int            `json:"non_finite_values"`
	Latency   []jsonLatency  `json:"latency"`
	Cost      []CostRow      `json:"cost"`
	Scaling   []ScalingCurve `json:"scaling"`
	// Interference is null unless the run measured alone and together.
	Interference *Interference `json:"interference"`
	Samples      []jsonSample  `json:"samples"`
	Failures     []jsonFailure `json:"failures"`
	// Audit is null for a run without an isolation audit.
	Audit *audit.Report `json:"audit"`
}

type jsonRun struct {
	ID             int64                        `json:"id"`
	ScenarioName   string                       `json:"scenario_name"`
	ScenarioSource string                       `json:"scenario_source"`
	ScenarioHash   string                       `json:"scenario_hash"`
	ScenarioText   string                       `json:"scenario_text"` // as text, not base64
	Baseline       string                       `json:"baseline"`
	Started        time.Time                    `json:"started"`
	Finished       *time.Time                   `json:"finished"` // null while running
	Status         string                       `json:"status"`
	Host           hostinfo.Fingerprint         `json:"host"`
	Guests         map[string]store.GuestRecord `json:"guests"`
	// Dropped are the optional groups the host refused.
	Dropped []store.DroppedGroup `json:"dropped,omitempty"`
	// Origin is where an imported run was measured.
	Origin string `json:"origin,omitempty"`
	// HostLoad is what the host did besides the run during its steps;
	// absent when not asked for, steps 0 when the run has none.
	HostLoad *HostLoad `json:"host_load,omitempty"`
}

type jsonSample struct {
	RunID      int64           `json:"run_id"`
	Guest      string          `json:"guest"`
	Group      string          `json:"group"`
	Kind       string          `json:"kind"`
	Runtime    string          `json:"runtime"`
	WorkloadID string          `json:"workload_id"`
	Workload   string          `json:"workload"`
	Params     workload.Params `json:"params"`
	Repetition int             `json:"repetition"`
	Metric     string          `json:"metric"`
	Unit       string          `json:"unit"`
	Value      *float64        `json:"value"` // null for NaN and ±Inf, which JSON cannot carry
	Better     workload.Better `json:"better"`
	At         time.Time       `json:"at"`
	WallNS     int64           `json:"wall_ns"`
	CPUNS      int64           `json:"cpu_ns"`
	// Histogram is the distribution behind a latency sample, absent for
	// a scalar.
	Histogram *stats.Histogram `json:"histogram,omitempty"`
	// NonFinite says what a null value was, as stats.MarshalFinite does.
	NonFinite map[string]string `json:"non_finite,omitempty"`
}

// jsonLatency is a LatencyRow with its figures; a figure is null when the
// merged histogram holds no observation.
type jsonLatency struct {
	WorkloadID string          `json:"workload_id"`
	Metric     string          `json:"metric"`
	Unit       string          `json:"unit"`
	Better     workload.Better `json:"better"`
	Group      string          `json:"group"`
	Params     workload.Params `json:"params"`
	Executions int             `json:"executions"`
	Count      uint64          `json:"count"`
	Skipped    int             `json:"skipped"`
	P50        *float64        `json:"p50"`
	P90        *float64        `json:"p90"`
	P99        *float64        `json:"p99"`
	P999       *float64        `json:"p99_9"`
	Min        *float64        `json:"min"`
	Mean       *float64        `json:"mean"`
	Max        *float64        `json:"max"`
	StdDev     *float64        `json:"stddev"`
}

func finiteOrNil(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}

func toJSONLatency(r LatencyRow) jsonLatency {
	h := r.Hist
	return jsonLatency{WorkloadID: r.WorkloadID, Metric: r.Metric, Unit: r.Unit, Better: r.Better, Group: r.Group, Params: r.Params,
		Executions: r.Executions, Count: h.Count(), Skipped: r.Skipped,
		P50: finiteOrNil(h.Quantile(0.5)), P90: finiteOrNil(h.Quantile(0.9)), P99: finiteOrNil(h.Quantile(0.99)),
		P999: finiteOrNil(h.Quantile(0.999)), Min: finiteOrNil(h.Min()), Mean: finiteOrNil(h.Mean()), Max: finiteOrNil(h.Max()),
		StdDev: finiteOrNil(h.StdDev())}
}

type jsonFailure struct {
	Guest      string    `json:"guest"`
	Group      string    `json:"group"`
	WorkloadID string    `json:"workload_id"` // empty: the guest did not start
	Repetition int       `json:"repetition"`
	Error      string    `json:"error"`
	Stderr     string    `json:"stderr"`
	At         time.Time `json:"at"`
}

// WriteJSON writes the run, its comparison and every raw sample.
func WriteJSON(w io.Writer, c Comparison, samples []store.Sample) error {
	run := c.Run
	out := jsonReport{
		Run: jsonRun{ID: run.ID, ScenarioName: run.ScenarioName, ScenarioSource: run.ScenarioSource, ScenarioHash: run.ScenarioHash,
			ScenarioText: string(run.ScenarioText), Baseline: run.Baseline, Started: run.Started.UTC(), Status: run.Status,
			Host: run.Host, Guests: run.Guests, Dropped: run.Dropped, Origin: run.Origin, HostLoad: c.Load},
		Columns: c.Columns, Index: jsonEstimates(c.Index), Footprint: jsonEstimates(c.Footprint), Rows: make([]Row, len(c.Rows)),
		NonFinite: c.NonFinite, Latency: make([]jsonLatency, len(c.Latency)),
		// Empty lists rather than null, so a reader can range over them.
		Cost: append([]CostRow{}, c.Cost...), Scaling: append([]ScalingCurve{}, c.Scaling...),
		Samples: make([]jsonSample, len(samples)), Failures: make([]jsonFailure, len(c.Failures)),
		Audit: c.Audit,
	}
	if m := c.Interference; m != nil {
		clean := *m
		clean.Rows = make([]InterferenceRow, len(m.Rows))
		for i, r := range m.Rows {
			clean.Rows[i] = r
			clean.Rows[i].Cells = sanitizeCells(r.Cells)
		}
		out.Interference = &clean
	}
	for i, r := range c.Latency {
		out.Latency[i] = toJSONLatency(r)
	}
	if !run.Finished.IsZero() {
		finished := run.Finished.UTC()
		out.Run.Finished = &finished
	}
	for i, r := range c.Rows {
		out.Rows[i] = r
		out.Rows[i].Cells = sanitizeCells(r.Cells)
	}
	for i, s := range samples {
		out.Samples[i] = jsonSample{RunID: s.RunID, Guest: s.Guest, Group: s.Group, Kind: s.Kind, Runtime: s.Runtime,
			WorkloadID: s.WorkloadID, Workload: s.Workload, Params: s.Params, Repetition: s.Repetition, Metric: s.Metric,
			Unit: s.Unit, Better: s.Better, At: s.At.UTC(), WallNS: s.WallNS, CPUNS: s.CPUNS, Histogram: s.Hist}
		if finite(s.Value) {
			out.Samples[i].Value = &s.Value
		} else {
			out.Samples[i].NonFinite = map[string]string{"value": stats.NonFiniteName(s.Value)}
		}
	}
	for i, f := range c.Failures {
		out.Failures[i] = jsonFailure{Guest: f.Guest, Group: f.Group, WorkloadID: f.WorkloadID, Repetition: f.Repetition,
			Error: f.Error, Stderr: f.Stderr, At: f.At.UTC()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// jsonEstimate is an overhead index; null where nothing was comparable,
// low and high null where the repetitions cannot bound it (only one).
type jsonEstimate struct {
	Value *float64 `json:"value"`
	Low   *float64 `json:"low"`
	High  *float64 `json:"high"`
}

// jsonEstimates converts overhead indexes for JSON, which has no NaN.
func jsonEstimates(es []stats.Estimate) []jsonEstimate {
	if es == nil {
		return nil
	}
	out := make([]jsonEstimate, len(es))
	for i, e := range es {
		if finite(e.Value) {
			out[i] = jsonEstimate{Value: &e.Value}
			if finite(e.Low) && finite(e.High) {
				out[i].Low, out[i].High = &e.Low, &e.High
			}
		}
	}
	return out
}

// sanitizeCells zeroes the ratio of cells marked not comparable, where it
// means nothing and may be NaN, which JSON cannot carry.
func sanitizeCells(cells []Cell) []Cell {
	out := make([]Cell, len(cells))
	for i, c := range cells {
		if !c.Comparable {
			c.Normalized = stats.Normalized{}
		}
		out[i] = c
	}
	return out
}
