package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// Interference is the consolidation matrix of a run that measured each
// workload both alone and together: every group's headline value alone
// and while all ran at once, normalised to the baseline alone — (1) the
// host with the guests idle, (2) each guest with the host idle, (3) host
// and guests concurrently.
type Interference struct {
	Columns []InterferenceColumn `json:"columns"`
	Rows    []InterferenceRow    `json:"rows"`
}

// InterferenceColumn is one group in one mode.
type InterferenceColumn struct {
	Group string `json:"group"`
	Mode  string `json:"mode"`
	Label string `json:"label"`
}

// InterferenceRow is one workload entry's headline metric; Case holds the
// entry's other case parameters (noise profile, fleet size), if any.
type InterferenceRow struct {
	WorkloadID string          `json:"workload_id"`
	Case       string          `json:"case,omitempty"`
	Metric     string          `json:"metric"`
	Unit       string          `json:"unit"`
	Better     workload.Better `json:"better"`
	Cells      []Cell          `json:"cells"` // parallel to Columns
}

// Entry titles the row.
func (r InterferenceRow) Entry() string { return entryName(r.WorkloadID, r.Case) }

// Modes of a fleet step, as the scenario names them.
const (
	modeAlone    = "alone"
	modeTogether = "together"
)

// splitMode takes the mode out of a case, returning the rest.
func splitMode(c string) (mode, rest string) {
	var kept []string
	for _, part := range strings.Fields(c) {
		if v, ok := strings.CutPrefix(part, "mode="); ok {
			mode = v
			continue
		}
		kept = append(kept, part)
	}
	return mode, strings.Join(kept, " ")
}

// buildInterference makes the matrix from the comparison's rows; nil when
// the run has no entry measured both alone and together. An entry shows
// its first metric, or every metric its workload names as headlines.
func buildInterference(c Comparison, headlines map[string][]string) *Interference {
	type entryKey struct{ workload, rest, metric string }
	type cellKey struct {
		entryKey
		mode string
	}
	first := map[entryKey]string{} // the first metric of the entry, keyed without a metric
	var order []entryKey
	rowAt := map[cellKey]Row{}
	modes := map[entryKey]map[string]bool{}
	for _, r := range c.Rows {
		if r.Role != workload.RolePerformance {
			continue
		}
		mode, rest := splitMode(r.Case)
		if mode == "" {
			continue
		}
		entry := entryKey{workload: r.WorkloadID, rest: rest}
		if _, ok := first[entry]; !ok {
			first[entry] = r.Metric
		}
		shown := r.Metric == first[entry]
		if h := headlines[r.WorkloadID]; len(h) > 0 {
			shown = slices.Contains(h, r.Metric)
		}
		if !shown {
			continue
		}
		k := entryKey{r.WorkloadID, rest, r.Metric}
		if modes[k] == nil {
			order = append(order, k)
			modes[k] = map[string]bool{}
		}
		rowAt[cellKey{k, mode}] = r
		modes[k][mode] = true
	}
	m := &Interference{}
	base := -1
	for j, col := range c.Columns {
		if col.Baseline {
			base = j
		}
	}
	if base < 0 {
		return nil
	}
	type source struct{ col int }
	var sources []source
	var colModes []string
	for _, mode := range []string{modeAlone, modeTogether} {
		add := func(j int) {
			col := c.Columns[j]
			label := fmt.Sprintf("%s %s", col.Group, mode)
			m.Columns = append(m.Columns, InterferenceColumn{Group: col.Group, Mode: mode, Label: label})
			sources = append(sources, source{j})
			colModes = append(colModes, mode)
		}
		add(base)
		for j := range c.Columns {
			if j != base {
				add(j)
			}
		}
	}
	for _, k := range order {
		if !modes[k][modeAlone] || !modes[k][modeTogether] {
			continue
		}
		alone := rowAt[cellKey{k, modeAlone}]
		ref := alone.Cells[base]
		if !ref.Present {
			continue
		}
		row := InterferenceRow{WorkloadID: k.workload, Case: k.rest, Metric: alone.Metric, Unit: alone.Unit, Better: alone.Better}
		for i, src := range sources {
			from := rowAt[cellKey{k, colModes[i]}]
			if src.col >= len(from.Cells) || !from.Cells[src.col].Present {
				row.Cells = append(row.Cells, Cell{})
				continue
			}
			cell := Cell{Present: true, Summary: from.Cells[src.col].Summary}
			if ref.Summary.Mean != 0 {
				n := stats.Normalize(cell.Summary, ref.Summary)
				if i == 0 {
					rel := ref.Summary.RelativeHalfWidth()
					n = stats.Normalized{Ratio: 1, CILow: 1 - rel, CIHigh: 1 + rel}
				}
				cell.Normalized, cell.Comparable = n, finite(n.Ratio) && finite(n.CILow) && finite(n.CIHigh)
			}
			row.Cells = append(row.Cells, cell)
		}
		m.Rows = append(m.Rows, row)
	}
	if len(m.Rows) == 0 {
		return nil
	}
	return m
}

// writeInterference prints the matrix after the main table.
func writeInterference(w io.Writer, m *Interference) {
	if m == nil {
		return
	}
	fmt.Fprintln(w, "\ninterference: each workload's headline alone and with every guest running it at once, against the baseline alone = 1.00")
	header := []string{"workload / metric"}
	for _, c := range m.Columns {
		header = append(header, c.Label)
	}
	rows := [][]string{header}
	for _, r := range m.Rows {
		line := []string{fmt.Sprintf("%s %s %s", r.Entry(), r.Metric, arrow(string(r.Better)))}
		for _, cell := range r.Cells {
			line = append(line, cellText(cell, r.Unit))
		}
		rows = append(rows, line)
	}
	writeAligned(w, rows, func(int, int) int { return 0 }, false)
}
