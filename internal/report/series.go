package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
)

// RunSeries is one scenario's runs on one machine
// (hostinfo.Fingerprint.SameMachine: a new kernel, microcode or tool
// version is the same machine changed, which is what a series over time
// is for) in start order, and per
// headline metric each group's mean in every run with the runs at which
// it changed.
type RunSeries struct {
	Scenario string
	Machine  string
	Runs     []store.Run
	Metrics  []SeriesMetric
	Options  stats.ChangePointOptions
}

// SeriesMetric is one headline metric of one workload entry in one case.
type SeriesMetric struct {
	AcrossRow
	Groups []SeriesGroup
}

// SeriesGroup is one guest group's figures of a metric over the runs.
type SeriesGroup struct {
	Column
	// Cells are parallel to RunSeries.Runs: the group's summary in each
	// run and its ratio to that run's baseline; not present where the
	// run did not measure it.
	Cells []Cell
	// ChangePoints index Runs: each the first run of a new level of the
	// group's means.
	ChangePoints []stats.ChangePoint
}

// changeAt says whether run i starts a new level.
func (g SeriesGroup) changeAt(i int) bool {
	return slices.ContainsFunc(g.ChangePoints, func(c stats.ChangePoint) bool { return c.Index == i })
}

// BuildSeries arranges runs (in start order, each with its samples) of one
// scenario as series: for every workload entry its headline metrics
// (workload.Headliner; else its first), for every group its mean in each
// run, and where those means changed (stats.ChangePoints on the means of
// the runs that measured it). The means, not the ratios, are searched: a
// ratio moves when either side does, and a change of the machine moves
// the baseline's mean too, which is worth seeing as such.
func BuildSeries(runs []store.Run, samples [][]store.Sample, o stats.ChangePointOptions) RunSeries {
	s := RunSeries{Runs: runs, Options: o}
	if len(runs) > 0 {
		s.Scenario, s.Machine = runs[0].ScenarioName, runs[0].Host.Machine()
	}
	cs := make([]Comparison, len(runs))
	heads := map[string][]string{}
	for i, run := range runs {
		cs[i] = Build(run, samples[i], nil)
		for id, h := range headlines(samples[i]) {
			if _, ok := heads[id]; !ok || len(h) > 0 {
				heads[id] = h
			}
		}
	}
	type rowKey struct{ workload, cse, metric string }
	index := map[rowKey]int{}
	firstOfEntry := map[string]bool{}
	for _, c := range cs {
		for _, r := range c.Rows {
			k := rowKey{r.WorkloadID, r.Case, r.Metric}
			if _, ok := index[k]; ok {
				continue
			}
			first := !firstOfEntry[r.Entry()]
			firstOfEntry[r.Entry()] = true
			if h := heads[r.WorkloadID]; len(h) > 0 && !slices.Contains(h, r.Metric) || len(h) == 0 && !first {
				continue
			}
			index[k] = len(s.Metrics)
			s.Metrics = append(s.Metrics, SeriesMetric{AcrossRow: AcrossRow{WorkloadID: r.WorkloadID, Case: r.Case, Metric: r.Metric,
				Unit: r.Unit, Better: r.Better}})
		}
	}
	for m := range s.Metrics {
		metric := &s.Metrics[m]
		k := rowKey{metric.WorkloadID, metric.Case, metric.Metric}
		groupAt := map[string]int{}
		for i, c := range cs {
			ri := slices.IndexFunc(c.Rows, func(r Row) bool { return rowKey{r.WorkloadID, r.Case, r.Metric} == k })
			if ri < 0 {
				continue
			}
			for j, col := range c.Columns {
				cell := c.Rows[ri].Cells[j]
				if !cell.Present {
					continue
				}
				g, ok := groupAt[col.Group]
				if !ok {
					g = len(metric.Groups)
					groupAt[col.Group] = g
					metric.Groups = append(metric.Groups, SeriesGroup{Column: col, Cells: make([]Cell, len(runs))})
				}
				metric.Groups[g].Cells[i] = cell
			}
		}
		for g := range metric.Groups {
			group := &metric.Groups[g]
			var means []float64
			var at []int
			for i, cell := range group.Cells {
				if cell.Present {
					means, at = append(means, cell.Summary.Mean), append(at, i)
				}
			}
			for _, cp := range stats.ChangePoints(means, o) {
				cp.Index = at[cp.Index]
				group.ChangePoints = append(group.ChangePoints, cp)
			}
		}
	}
	return s
}

// seriesMethod states how change points were found, as every rendering
// says it.
func seriesMethod(o stats.ChangePointOptions) string {
	return fmt.Sprintf("change points by E-divisive means on each group's run means: p < %g against %d permutations, at least %d runs a level",
		o.Alpha, o.Permutations, max(o.MinSize, 2))
}

// seriesMarker marks the first run of a new level.
const seriesMarker = "◆"

// textChangedMarker marks a run whose scenario text differs from the run
// before it's: a change of level there may be the scenario's.
const textChangedMarker = "✎"

const textChangedNote = textChangedMarker + " the scenario's text changed since the run before: a change there may be the scenario's"

// textChanged says whether the scenario's text changed along the series.
func (s RunSeries) textChanged() bool {
	for i := 1; i < len(s.Runs); i++ {
		if s.Runs[i].ScenarioHash != s.Runs[i-1].ScenarioHash {
			return true
		}
	}
	return false
}

// changeText names a metric's change points, each group's with its run
// and p-value, or says there is none.
func (s RunSeries) changeText(m SeriesMetric) string {
	var changes []string
	for _, g := range m.Groups {
		for _, cp := range g.ChangePoints {
			changes = append(changes, fmt.Sprintf("%s at run %d (p=%.3g)", g.Label(), s.Runs[cp.Index].ID, cp.P))
		}
	}
	if len(changes) == 0 {
		return "no change point"
	}
	return seriesMarker + " changed: " + strings.Join(changes, ", ")
}

// WriteSeriesTable prints a table per headline metric: a row per run
// (start time, id, each group's mean and its ratio to that run's
// baseline), a marker where a group's level changed.
func WriteSeriesTable(out io.Writer, s RunSeries, opts TableOptions) error {
	w := &stickyWriter{w: out}
	fmt.Fprintf(w, "scenario %s on %s · %d complete runs in start order\n", termtext.Safe(s.Scenario), termtext.Safe(s.Machine), len(s.Runs))
	fmt.Fprintln(w, seriesMethod(s.Options))
	if s.textChanged() {
		fmt.Fprintln(w, textChangedNote)
	}
	for _, m := range s.Metrics {
		fmt.Fprintf(w, "\n%s: each group's mean (its ratio to the run's baseline)\n", termtext.Safe(fmt.Sprintf("%s %s %s", m.Entry(), m.Metric, arrow(string(m.Better)))))
		writeAligned(w, foldCells(s.rows(m), opts.Width), func(int, int) int { return 0 }, false)
		fmt.Fprintln(w, s.changeText(m))
		var trend [][]string
		for _, g := range m.Groups {
			trend = append(trend, []string{"  " + g.Label(), sparkline(g.Cells)})
		}
		fmt.Fprintln(w, "each group's means from 0 (▁) to its highest (█), a run a character:")
		writeAligned(w, trend, func(int, int) int { return 0 }, false)
	}
	if len(s.Metrics) == 0 {
		fmt.Fprintln(w, "\nno metric was measured in these runs")
	}
	return w.err
}

// rows are a metric's table, its header first: a row per run, its start,
// its id and each group's cell.
func (s RunSeries) rows(m SeriesMetric) [][]string {
	header := []string{"started", "run"}
	for _, g := range m.Groups {
		header = append(header, g.Label())
	}
	rows := [][]string{header}
	for i, run := range s.Runs {
		id := strconv.FormatInt(run.ID, 10)
		if i > 0 && run.ScenarioHash != s.Runs[i-1].ScenarioHash {
			id += " " + textChangedMarker
		}
		row := []string{run.Started.UTC().Format("2006-01-02 15:04"), id}
		for _, g := range m.Groups {
			row = append(row, seriesCell(g, i, m.Unit))
		}
		rows = append(rows, row)
	}
	return rows
}

// sparkBars are a sparkline's levels, lowest first.
var sparkBars = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the means of cells from 0 (or the lowest, if below)
// to the highest, a character each, a space where a run has none: the
// shape of a series at a glance. From 0, as the line plots are, so that
// noise of a percent does not look like a cliff.
func sparkline(cells []Cell) string {
	lo, hi := 0.0, math.Inf(-1)
	for _, c := range cells {
		if c.Present {
			lo, hi = math.Min(lo, c.Summary.Mean), math.Max(hi, c.Summary.Mean)
		}
	}
	out := make([]rune, len(cells))
	for i, c := range cells {
		switch {
		case !c.Present:
			out[i] = ' '
		case hi == lo:
			out[i] = sparkBars[len(sparkBars)/2]
		default:
			out[i] = sparkBars[int(math.Round((c.Summary.Mean-lo)/(hi-lo)*float64(len(sparkBars)-1)))]
		}
	}
	return strings.TrimRight(string(out), " ")
}

// seriesCell is a group's mean in run i with its ratio, marked where a
// new level starts.
func seriesCell(g SeriesGroup, i int, unit string) string {
	cell := g.Cells[i]
	if !cell.Present {
		return "—"
	}
	text := formatQuantity(cell.Summary.Mean, unit)
	if cell.Comparable && !g.Baseline {
		text += " (" + formatRatio(cell.Normalized.Ratio) + ")"
	}
	if g.changeAt(i) {
		text = seriesMarker + " " + text
	}
	return text
}

type jsonSeries struct {
	Scenario string                   `json:"scenario"`
	Machine  string                   `json:"machine"`
	Method   string                   `json:"method"`
	Options  stats.ChangePointOptions `json:"options"`
	Runs     []jsonSeriesRun          `json:"runs"`
	Metrics  []jsonSeriesMetric       `json:"metrics"`
}

type jsonSeriesRun struct {
	ID           int64                `json:"id"`
	Started      string               `json:"started"`
	ScenarioHash string               `json:"scenario_hash"`
	Host         hostinfo.Fingerprint `json:"host"`
}

type jsonSeriesMetric struct {
	AcrossRow
	Groups []jsonSeriesGroup `json:"groups"`
}

type jsonSeriesGroup struct {
	Column
	Cells        []Cell              `json:"cells"` // parallel to runs
	ChangePoints []stats.ChangePoint `json:"change_points"`
}

// WriteSeriesJSON writes the runs, and per metric and group every run's
// cell and the change points (indexes into runs).
func WriteSeriesJSON(w io.Writer, s RunSeries) error {
	out := jsonSeries{Scenario: s.Scenario, Machine: s.Machine, Method: seriesMethod(s.Options), Options: s.Options,
		Runs: []jsonSeriesRun{}, Metrics: []jsonSeriesMetric{}}
	for _, r := range s.Runs {
		out.Runs = append(out.Runs, jsonSeriesRun{ID: r.ID, Started: r.Started.UTC().Format(time.RFC3339Nano),
			ScenarioHash: r.ScenarioHash, Host: r.Host})
	}
	for _, m := range s.Metrics {
		jm := jsonSeriesMetric{AcrossRow: m.AcrossRow, Groups: []jsonSeriesGroup{}}
		for _, g := range m.Groups {
			jm.Groups = append(jm.Groups, jsonSeriesGroup{Column: g.Column, Cells: sanitizeCells(g.Cells),
				ChangePoints: append([]stats.ChangePoint{}, g.ChangePoints...)})
		}
		out.Metrics = append(out.Metrics, jm)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
