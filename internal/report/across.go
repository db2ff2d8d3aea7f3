package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/internal/workload"
)

// ErrMixedScenarios is returned by BuildAcross for runs of different
// scenarios: their rows would not measure the same thing.
var ErrMixedScenarios = errors.New("the runs are of different scenarios")

// ErrTooFewRuns is returned by BuildAcross for fewer than two runs.
var ErrTooFewRuns = errors.New("a comparison across machines needs at least two runs")

// Across is one scenario measured on several machines, each machine's
// groups against its own baseline: a machine's ratios say what its
// isolation costs there, its absolute figures what the machine does.
type Across struct {
	Scenario string
	Machines []Machine
	// Rows are every workload entry, case and metric any machine measured,
	// in first-seen order; each machine's Comparison.Rows is parallel to
	// them, its cells all missing where it did not measure the row.
	Rows []AcrossRow
}

// Machine is one run of the scenario and the machine it ran on.
type Machine struct {
	// Label names the machine, unique among those compared.
	Label      string
	Comparison Comparison
}

// AcrossRow is one metric of one workload entry in one case.
type AcrossRow struct {
	WorkloadID string          `json:"workload_id"`
	Case       string          `json:"case,omitempty"`
	Metric     string          `json:"metric"`
	Unit       string          `json:"unit"`
	Better     workload.Better `json:"better"`
	Role       workload.Role   `json:"role"`
}

// Entry names the row's workload entry and case together.
func (r AcrossRow) Entry() string { return entryName(r.WorkloadID, r.Case) }

// BuildAcross sets the runs' own comparisons (Build) side by side. Runs of
// different scenarios are refused; a scenario whose text changed between
// runs is for the caller to warn about.
func BuildAcross(cs []Comparison) (Across, error) {
	if len(cs) < 2 {
		return Across{}, ErrTooFewRuns
	}
	var names []string
	for _, c := range cs {
		if !slices.Contains(names, c.Run.ScenarioName) {
			names = append(names, c.Run.ScenarioName)
		}
	}
	if len(names) > 1 {
		var runs []string
		for _, c := range cs {
			runs = append(runs, fmt.Sprintf("run %d: %s", c.Run.ID, c.Run.ScenarioName))
		}
		return Across{}, fmt.Errorf("%w (%s): compare runs of one scenario", ErrMixedScenarios, strings.Join(runs, ", "))
	}
	a := Across{Scenario: names[0]}
	type rowKey struct{ workload, cse, metric string }
	index := map[rowKey]int{}
	for _, c := range cs {
		for _, r := range c.Rows {
			k := rowKey{r.WorkloadID, r.Case, r.Metric}
			if _, ok := index[k]; !ok {
				index[k] = len(a.Rows)
				a.Rows = append(a.Rows, AcrossRow{WorkloadID: r.WorkloadID, Case: r.Case, Metric: r.Metric, Unit: r.Unit, Better: r.Better, Role: r.Role})
			}
		}
	}
	labels := machineLabels(cs)
	for i, c := range cs {
		aligned := make([]Row, len(a.Rows))
		for j, r := range a.Rows {
			aligned[j] = Row{WorkloadID: r.WorkloadID, Case: r.Case, Metric: r.Metric, Unit: r.Unit, Better: r.Better,
				Role: r.Role, Cells: make([]Cell, len(c.Columns))}
		}
		for _, r := range c.Rows {
			aligned[index[rowKey{r.WorkloadID, r.Case, r.Metric}]] = r
		}
		c.Rows = aligned
		a.Machines = append(a.Machines, Machine{Label: labels[i], Comparison: c})
	}
	return a, nil
}

// machineLabels names each run's machine by its host name, architecture
// and kernel, which is what tells runs on a machine apart when it was
// upgraded between them; runs whose labels would be the same are told
// apart by their run ids.
func machineLabels(cs []Comparison) []string {
	out := make([]string, len(cs))
	count := map[string]int{}
	for i, c := range cs {
		out[i] = machineName(c.Run.Host)
		count[out[i]]++
	}
	for i, c := range cs {
		if count[out[i]] > 1 {
			out[i] += fmt.Sprintf(" run %d", c.Run.ID)
		}
	}
	return out
}

func machineName(h hostinfo.Fingerprint) string { return hostTitle(h.Hostname, h.Arch, h.Kernel) }

// hostTitle is a host's name with what else tells it apart in
// parentheses, leaving out what its fingerprint does not know.
func hostTitle(name string, about ...string) string {
	if name == "" {
		name = "unknown host"
	}
	about = slices.DeleteFunc(about, func(s string) bool { return s == "" })
	if len(about) == 0 {
		return name
	}
	return name + " (" + strings.Join(about, ", ") + ")"
}

// where says on how many machines (hostinfo.Fingerprint.SameMachine: a
// kernel upgrade does not make another) the runs were made, and how many
// runs they are when that is not one a machine.
func (a Across) where() string {
	var machines []hostinfo.Fingerprint
	for _, m := range a.Machines {
		h := m.Comparison.Run.Host
		if !slices.ContainsFunc(machines, h.SameMachine) {
			machines = append(machines, h)
		}
	}
	n := len(machines)
	if n == len(a.Machines) {
		return fmt.Sprintf("on %d machines", n)
	}
	if n == 1 {
		return fmt.Sprintf("in %d runs on one machine", len(a.Machines))
	}
	return fmt.Sprintf("in %d runs on %d machines", len(a.Machines), n)
}

// title names the machine and its run, once: a label that tells one
// machine's runs apart already names it.
func (m Machine) title() string {
	if run := m.run(); !strings.HasSuffix(m.Label, " "+run) {
		return m.Label + " · " + run
	}
	return m.Label
}

func (m Machine) run() string { return fmt.Sprintf("run %d", m.Comparison.Run.ID) }

// machineDetails is what a machine's legend line says beyond its label.
func machineDetails(m Machine) string {
	run, h := m.Comparison.Run, m.Comparison.Run.Host
	var parts []string
	if m.title() != m.Label {
		parts = append(parts, m.run())
	}
	parts = append(parts, run.Status)
	if h.CPUModel != "" {
		parts = append(parts, h.CPUModel)
	}
	if h.OnlineCPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", h.OnlineCPUs))
	}
	if run.Baseline != "" {
		parts = append(parts, "baseline "+run.Baseline)
	}
	return strings.Join(parts, " · ")
}

// shared are the rows every machine's baseline measured: each machine's
// index over only those compares like with like, where a machine that
// measured a workload the other did not would otherwise have it counted.
func (a Across) shared() []bool {
	out := make([]bool, len(a.Rows))
	for i := range a.Rows {
		out[i] = true
		for _, m := range a.Machines {
			c := m.Comparison
			base := slices.IndexFunc(c.Columns, func(col Column) bool { return col.Baseline })
			out[i] = out[i] && base >= 0 && c.Rows[i].Cells[base].Present
		}
	}
	return out
}

// has reports whether any machine has a row of the role.
func (a Across) has(role workload.Role) bool {
	return slices.ContainsFunc(a.Rows, func(r AcrossRow) bool { return r.Role == role })
}

// sharedIndex is each machine's index over the rows of one role
// (parallel to its columns) that all machines measured.
func (a Across) sharedIndex(role workload.Role) [][]stats.Estimate {
	shared := a.shared()
	out := make([][]stats.Estimate, len(a.Machines))
	for i, m := range a.Machines {
		view := m.Comparison
		view.Rows = nil
		for j, r := range m.Comparison.Rows {
			if shared[j] {
				view.Rows = append(view.Rows, r)
			}
		}
		out[i] = indexOf(view, role)
	}
	return out
}

// sharedCount says over how many of the role's rows the shared index is.
func (a Across) sharedCount(role workload.Role) string {
	shared, total := 0, 0
	for i, ok := range a.shared() {
		if a.Rows[i].Role != role {
			continue
		}
		total++
		if ok {
			shared++
		}
	}
	return fmt.Sprintf("over the %d of %d %s metrics every machine measured", shared, total, role)
}

// indexRows are an index of every group on every machine (as
// sharedIndex gives it), a row per group (in first-seen order, titled as
// the first machine with it titles it), a column per machine.
func (a Across) indexRows(index [][]stats.Estimate) [][]string {
	var groups, labels []string
	for _, m := range a.Machines {
		for _, col := range m.Comparison.Columns {
			if !slices.Contains(groups, col.Group) {
				groups, labels = append(groups, col.Group), append(labels, col.Label())
			}
		}
	}
	header := []string{"group"}
	for _, m := range a.Machines {
		header = append(header, m.Label)
	}
	rows := [][]string{header}
	for g, group := range groups {
		row := []string{labels[g]}
		for i, m := range a.Machines {
			cell := "—"
			if j := slices.IndexFunc(m.Comparison.Columns, func(c Column) bool { return c.Group == group }); j >= 0 {
				cell = formatEstimate(index[i][j])
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteAcrossTable prints the machines, each group's overhead index on
// every machine, then every group's ratio to its machine's baseline with
// its absolute figure: one table with the machines as column groups where
// it fits opts.Width, else one block per machine.
func WriteAcrossTable(out io.Writer, a Across, opts TableOptions) error {
	w := &stickyWriter{w: out}
	fmt.Fprintln(w, termtext.Safe(fmt.Sprintf("scenario %s %s · each against its own baseline = 1.00", a.Scenario, a.where())))
	var legend [][]string
	for _, m := range a.Machines {
		legend = append(legend, []string{"  " + m.Label, machineDetails(m)})
		if o := m.Comparison.Run.Origin; o != "" {
			// Its own line: a URL beside the details would outgrow a terminal.
			legend = append(legend, []string{"", "measured on " + o})
		}
	}
	writeAligned(w, legend, func(int, int) int { return 0 }, false)
	fmt.Fprintf(w, "\noverhead index ↑ %s\n", a.sharedCount(workload.RolePerformance))
	writeAligned(w, foldCells(a.indexRows(a.sharedIndex(workload.RolePerformance)), opts.Width), func(int, int) int { return 0 }, false)
	if a.has(workload.RoleFootprint) {
		fmt.Fprintf(w, "\nfootprint index ↑ %s\n", a.sharedCount(workload.RoleFootprint))
		writeAligned(w, foldCells(a.indexRows(a.sharedIndex(workload.RoleFootprint)), opts.Width), func(int, int) int { return 0 }, false)
	}
	if rows, colours := a.wideRows(); opts.Width <= 0 || tableWidth(rows) <= opts.Width {
		fmt.Fprintln(w)
		writeAligned(w, rows, func(i, j int) int { return colours[i][j] }, opts.Color)
	} else {
		for _, m := range a.Machines {
			fmt.Fprintln(w, "\n"+termtext.Safe(fmt.Sprintf("%s · baseline %s = 1.00", m.title(), m.Comparison.Run.Baseline)))
			writeComparison(w, m.Comparison, opts)
		}
	}
	legendText := "↑ higher is better, ↓ lower is better; ± is the 95% confidence interval of the ratio;\n" +
		"in parentheses the group's mean;\n" + indexLegend(a.has(workload.RoleFootprint))
	if opts.Color {
		legendText = ansiDim + legendText + "; green/red: better/worse than the machine's baseline beyond that interval" + ansiReset
	}
	fmt.Fprintln(w, legendText)
	for _, m := range a.Machines {
		if run := m.Comparison.Run; run.Status != store.StatusComplete {
			fmt.Fprintf(w, "note: run %d on %s is %s; its figures cover only what was measured.\n", run.ID, termtext.Safe(m.Label), run.Status)
		}
	}
	return w.err
}

// wideRows are the machines as column groups of one table: a header of
// machine labels over one of their groups, a row per metric, then each
// machine's own overhead index; colours say each cell's verdict.
func (a Across) wideRows() (rows [][]string, colours [][]int) {
	machines, groups := []string{""}, []string{"workload / metric"}
	for _, m := range a.Machines {
		for j, col := range m.Comparison.Columns {
			label := ""
			if j == 0 {
				label = m.Label
			}
			machines, groups = append(machines, label), append(groups, col.Label())
		}
	}
	rows = [][]string{machines, groups}
	colours = [][]int{make([]int, len(groups)), make([]int, len(groups))}
	for i, r := range a.Rows {
		row, colour := []string{fmt.Sprintf("%s %s %s", r.Entry(), r.Metric, arrow(string(r.Better)))}, []int{0}
		for _, m := range a.Machines {
			for _, cell := range m.Comparison.Rows[i].Cells {
				row, colour = append(row, cellText(cell, r.Unit)), append(colour, verdict(cell, string(r.Better)))
			}
		}
		rows, colours = append(rows, row), append(colours, colour)
	}
	index, footprint := []string{"overhead index ↑"}, []string{"footprint index ↑"}
	for _, m := range a.Machines {
		for j, e := range m.Comparison.Index {
			index = append(index, formatEstimate(e))
			footprint = append(footprint, footprintText(m.Comparison.Footprint, j))
		}
	}
	rows, colours = append(rows, index), append(colours, make([]int, len(index)))
	if a.has(workload.RoleFootprint) {
		rows, colours = append(rows, footprint), append(colours, make([]int, len(footprint)))
	}
	return rows, colours
}

// jsonAcross is the JSON export of a comparison across machines.
type jsonAcross struct {
	Scenario string          `json:"scenario"`
	Machines []jsonMachine   `json:"machines"`
	Rows     []jsonAcrossRow `json:"rows"`
}

type jsonMachine struct {
	Label        string               `json:"label"`
	RunID        int64                `json:"run_id"`
	Origin       string               `json:"origin,omitempty"`
	ScenarioHash string               `json:"scenario_hash"`
	Status       string               `json:"status"`
	Baseline     string               `json:"baseline"`
	Host         hostinfo.Fingerprint `json:"host"`
	Columns      []Column             `json:"columns"`
	Index        []jsonEstimate       `json:"overhead_index"` // parallel to columns
	// SharedIndex is the index over only the rows every machine measured.
	SharedIndex []jsonEstimate `json:"overhead_index_shared"`
	// Footprint and SharedFootprint are the footprint index, the same
	// way; null for runs without launch and density rows.
	Footprint       []jsonEstimate `json:"footprint_index"`
	SharedFootprint []jsonEstimate `json:"footprint_index_shared"`
}

type jsonAcrossRow struct {
	AcrossRow
	// Cells holds, per machine, a cell per column of that machine.
	Cells [][]Cell `json:"cells"`
}

// WriteAcrossJSON writes the machines, their groups and indexes, and every
// row's cells per machine.
func WriteAcrossJSON(w io.Writer, a Across) error {
	out := jsonAcross{Scenario: a.Scenario, Machines: []jsonMachine{}, Rows: []jsonAcrossRow{}}
	shared := a.sharedIndex(workload.RolePerformance)
	var sharedFootprint [][]stats.Estimate
	if a.has(workload.RoleFootprint) {
		sharedFootprint = a.sharedIndex(workload.RoleFootprint)
	}
	for i, m := range a.Machines {
		c := m.Comparison
		jm := jsonMachine{Label: m.Label, RunID: c.Run.ID, Origin: c.Run.Origin, ScenarioHash: c.Run.ScenarioHash,
			Status: c.Run.Status, Baseline: c.Run.Baseline, Host: c.Run.Host, Columns: c.Columns, Index: jsonEstimates(c.Index),
			SharedIndex: jsonEstimates(shared[i]), Footprint: jsonEstimates(c.Footprint)}
		if sharedFootprint != nil {
			jm.SharedFootprint = jsonEstimates(sharedFootprint[i])
		}
		out.Machines = append(out.Machines, jm)
	}
	for i, r := range a.Rows {
		row := jsonAcrossRow{AcrossRow: r}
		for _, m := range a.Machines {
			row.Cells = append(row.Cells, sanitizeCells(m.Comparison.Rows[i].Cells))
		}
		out.Rows = append(out.Rows, row)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// acrossCSVColumns are the long form's columns, documented in docs/results.md.
var acrossCSVColumns = []string{"machine", "run_id", "group", "kind", "runtime", "baseline", "workload_id", "case", "metric",
	"unit", "better", "n", "mean", "ci_low", "ci_high", "ratio", "ratio_ci_low", "ratio_ci_high", "role"}

// WriteAcrossCSV writes one line per machine, group and row measured: the
// group's mean with its interval and its ratio to the machine's baseline
// with that ratio's interval (empty where there is no baseline to divide by).
func WriteAcrossCSV(w io.Writer, a Across) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(acrossCSVColumns); err != nil {
		return err
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for i, r := range a.Rows {
		for _, m := range a.Machines {
			for j, cell := range m.Comparison.Rows[i].Cells {
				if !cell.Present {
					continue
				}
				col := m.Comparison.Columns[j]
				s := cell.Summary
				rec := []string{m.Label, strconv.FormatInt(m.Comparison.Run.ID, 10), col.Group, col.Kind, col.Runtime,
					strconv.FormatBool(col.Baseline), r.WorkloadID, r.Case, r.Metric, r.Unit, string(r.Better),
					strconv.Itoa(s.N), num(s.Mean), num(s.CILow), num(s.CIHigh), "", "", "", string(r.Role)}
				if cell.Comparable {
					n := cell.Normalized
					at := slices.Index(acrossCSVColumns, "ratio")
					rec[at], rec[at+1], rec[at+2] = num(n.Ratio), num(n.CILow), num(n.CIHigh)
				}
				if err := cw.Write(rec); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
