package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/store"
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

// ParseFormat reads a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatTable, FormatHTML, FormatJSON, FormatCSV:
		return f, nil
	}
	return "", fmt.Errorf("%w %q (allowed: table, html, json, csv)", ErrUnknownFormat, s)
}

// csvFixedColumns are the dimensions every sample has; params follow as
// param_<name> columns, documented in docs/results.md.
var csvFixedColumns = []string{"run_id", "guest", "group", "kind", "runtime", "workload_id", "workload",
	"repetition", "metric", "unit", "value", "better", "at", "wall_ns", "cpu_ns"}

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
			s.At.UTC().Format(time.RFC3339Nano), strconv.FormatInt(s.WallNS, 10), strconv.FormatInt(s.CPUNS, 10)}
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
type jsonReport struct {
	Run      jsonRun         `json:"run"`
	Columns  []Column        `json:"columns"`
	Index    []jsonEstimate  `json:"overhead_index"` // parallel to columns
	Rows     []Row           `json:"rows"`
	Samples  []store.Sample  `json:"samples"`
	Failures []store.Failure `json:"failures"`
}

type jsonRun struct {
	store.Run
	ScenarioText string `json:"ScenarioText"` // as text, not base64
}

// WriteJSON writes the run, its comparison and every raw sample.
func WriteJSON(w io.Writer, c Comparison, samples []store.Sample) error {
	rows := make([]Row, len(c.Rows))
	for i, r := range c.Rows {
		rows[i] = r
		rows[i].Cells = sanitizeCells(r.Cells)
	}
	index := make([]jsonEstimate, len(c.Index))
	for i, e := range c.Index {
		if !math.IsNaN(e.Value) {
			index[i] = jsonEstimate{Value: &e.Value, Low: &e.Low, High: &e.High}
		}
	}
	out := jsonReport{Run: jsonRun{Run: c.Run, ScenarioText: string(c.Run.ScenarioText)}, Columns: c.Columns, Index: index, Rows: rows,
		Samples: orEmpty(samples), Failures: orEmpty(c.Failures)}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// jsonEstimate is an overhead index; null where nothing was comparable
// (JSON has no NaN).
type jsonEstimate struct {
	Value *float64 `json:"value"`
	Low   *float64 `json:"low"`
	High  *float64 `json:"high"`
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// sanitizeCells replaces NaN (which JSON cannot carry) by zero in cells
// marked not comparable, where the value means nothing anyway.
func sanitizeCells(cells []Cell) []Cell {
	out := make([]Cell, len(cells))
	for i, c := range cells {
		if !c.Comparable {
			c.Normalized.Ratio, c.Normalized.CILow, c.Normalized.CIHigh = 0, 0, 0
		}
		out[i] = c
	}
	return out
}
