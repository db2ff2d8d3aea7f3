package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/internal/workload"
)

// TableOptions tune the terminal table.
type TableOptions struct {
	// Color enables ANSI colours (the CLI sets it for a terminal without NO_COLOR).
	Color bool
	// Width is the terminal's width in columns; a comparison wider than
	// that is printed as one block per metric with a row per group. 0
	// keeps the wide form, one column per group, whatever its width.
	Width int
}

const (
	ansiGreen = "\x1b[32m"
	ansiRed   = "\x1b[31m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// WriteTable prints the comparison: one row per workload metric, one column
// per guest group, each cell the value normalised to the baseline (1.00)
// with the raw mean and unit beside it.
func WriteTable(out io.Writer, c Comparison, opts TableOptions) error {
	w := &stickyWriter{w: out}
	run := c.Run
	fmt.Fprintf(w, "run %d · %s · %s · baseline %s = 1.00%s\n", run.ID, termtext.Safe(run.ScenarioName), run.Status, termtext.Safe(run.Baseline), measuredOn(run))
	writeComparison(w, c, opts)
	legend := "↑ higher is better, ↓ lower is better; ± is the 95% confidence interval of the ratio;\n" + indexLegend(c.Footprint != nil)
	if opts.Color {
		legend = ansiDim + legend + "; green/red: better/worse than the baseline beyond that interval" + ansiReset
	}
	fmt.Fprintln(w, legend)
	for _, note := range []string{nonFiniteNote(c.NonFinite), sharedCPUsNote(run), loadNote(c.Load)} {
		if note != "" {
			fmt.Fprintln(w, "note: "+termtext.Safe(note))
		}
	}
	writeAudit(w, c.Audit, c.Columns, opts.Width)
	writeFrontier(w, c)
	writeDropped(w, run.Dropped)
	writeInterference(w, c.Interference)
	writeLatency(w, c.Latency)
	writeCost(w, c.Cost)
	writeFailures(w, c.Failures)
	if run.Status != store.StatusComplete {
		status := run.Status
		if run.StatusReason != "" {
			status += " — " + termtext.Safe(run.StatusReason)
		}
		fmt.Fprintf(w, "note: this run is %s; figures cover only what was measured.\n", status)
	}
	return w.err
}

// indexLegend explains the indexes, the footprint index where a run has one.
func indexLegend(footprint bool) string {
	legend := "overhead index: geometric mean over the workloads of each performance metric's ratio\n" +
		"(inverted where lower is better) [95% interval from the spread between repetitions]"
	if footprint {
		legend += ";\nfootprint index: the same over the fleet's launch and idle density rows, kept out of the\n" +
			"overhead index; [no interval]: a figure measured once (a fleet launches once), nothing to bound it"
	}
	return legend
}

// footprintText is column j's footprint index, blank for a run without one.
func footprintText(footprint []stats.Estimate, j int) string {
	if footprint == nil {
		return ""
	}
	return formatEstimate(footprint[j])
}

// measuredOn names where an imported run was measured, "" for a run of
// this store's host.
func measuredOn(run store.Run) string {
	if run.Origin == "" {
		return ""
	}
	return " · measured on " + termtext.Safe(run.Origin)
}

// writeComparison prints the ratios: wide, a column per group, when that
// fits opts.Width; else a block per metric with a row per group, so that a
// scenario of many groups stays readable in a terminal.
func writeComparison(w io.Writer, c Comparison, opts TableOptions) {
	header := []string{"workload / metric"}
	for _, col := range c.Columns {
		header = append(header, col.Label())
	}
	type metricRow struct {
		name    string
		cells   []string
		colours []int
	}
	var metrics []metricRow
	for _, r := range c.Rows {
		m := metricRow{name: fmt.Sprintf("%s %s %s", r.Entry(), r.Metric, arrow(string(r.Better)))}
		for _, cell := range r.Cells {
			m.cells = append(m.cells, cellText(cell, r.Unit))
			m.colours = append(m.colours, verdict(cell, string(r.Better)))
		}
		metrics = append(metrics, m)
	}
	index := metricRow{name: "overhead index ↑", colours: make([]int, len(c.Index))}
	for _, e := range c.Index {
		index.cells = append(index.cells, formatEstimate(e))
	}
	metrics = append(metrics, index)
	if c.Footprint != nil {
		footprint := metricRow{name: "footprint index ↑", colours: make([]int, len(c.Footprint))}
		for _, e := range c.Footprint {
			footprint.cells = append(footprint.cells, formatEstimate(e))
		}
		metrics = append(metrics, footprint)
	}

	rows := [][]string{header}
	colours := [][]int{make([]int, len(header))}
	for _, m := range metrics {
		rows = append(rows, append([]string{m.name}, m.cells...))
		colours = append(colours, append([]int{0}, m.colours...))
	}
	if opts.Width <= 0 || tableWidth(rows) <= opts.Width {
		writeAligned(w, rows, func(i, j int) int { return colours[i][j] }, opts.Color)
		return
	}
	// One table of every block's group rows, so values line up across
	// blocks; each block's name goes on a line of its own above its rows.
	var groupRows [][]string
	var groupColours [][]int
	for _, m := range metrics {
		for j, cell := range m.cells {
			groupRows = append(groupRows, []string{"  " + c.Columns[j].Label(), cell})
			groupColours = append(groupColours, []int{0, m.colours[j]})
		}
	}
	lines := alignLines(groupRows, func(i, j int) int { return groupColours[i][j] }, opts.Color)
	for _, m := range metrics {
		fmt.Fprintln(w, termtext.Safe(m.name))
		for range m.cells {
			fmt.Fprintln(w, lines[0])
			lines = lines[1:]
		}
	}
}

// minFold is the narrowest foldCells makes a column: narrower, a cell's
// words would stand one a line.
const minFold = 20

// foldCells wraps long cells at their spaces onto lines of their own, so
// that rows fit width columns: every column but the first (the rows'
// names) is held to the same limit, the highest that fits and at least
// minFold. A folded row becomes several, its other cells blank after its
// first line. A width of 0 leaves rows as they are.
func foldCells(rows [][]string, width int) [][]string {
	if width <= 0 || tableWidth(rows) <= width {
		return rows
	}
	widths := columnWidths(rows)
	// A word longer than the limit (a path) keeps its line whole, so its
	// column is as wide as it anyway, and wraps there.
	longest := make([]int, len(widths))
	for _, r := range rows {
		for j, cell := range r {
			for _, word := range strings.Fields(cell) {
				longest[j] = max(longest[j], utf8.RuneCountInString(word))
			}
		}
	}
	at := func(j, limit int) int { return max(limit, longest[j]) }
	fits := func(limit int) bool {
		total := widths[0] + 2*(len(widths)-1)
		for j := 1; j < len(widths); j++ {
			total += min(widths[j], at(j, limit))
		}
		return total <= width
	}
	limit := slices.Max(widths)
	for limit > minFold && !fits(limit) {
		limit--
	}
	var out [][]string
	for _, r := range rows {
		var lines [][]string
		for j, cell := range r {
			wrapped := []string{cell}
			if j > 0 {
				wrapped = wrapWords(cell, at(j, limit))
			}
			for i, l := range wrapped {
				if i == len(lines) {
					lines = append(lines, make([]string, len(r)))
				}
				lines[i][j] = l
			}
		}
		out = append(out, lines...)
	}
	return out
}

// wrapWords breaks s at spaces into lines of at most limit runes; a word
// longer than that (a path) keeps a line of its own, whole.
func wrapWords(s string, limit int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= limit:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

// tableWidth is how many columns writeAligned needs for rows.
func tableWidth(rows [][]string) int {
	widths := columnWidths(rows)
	total := 0
	for i := range widths {
		total += widths[i]
	}
	return total + 2*max(len(widths)-1, 0)
}

func arrow(better string) string {
	if better == "lower" {
		return "↓"
	}
	return "↑"
}

func cellText(c Cell, unit string) string {
	if !c.Present {
		return "—"
	}
	raw := "(" + formatQuantity(c.Summary.Mean, unit) + ")"
	if !c.Comparable {
		return "n/a " + raw
	}
	s := formatRatio(c.Normalized.Ratio) + " " + raw
	if half := c.Normalized.CIHigh - c.Normalized.Ratio; half > 0 {
		s += " ±" + formatRatio(half)
	}
	return s
}

// writeLatency prints the percentiles of each merged latency distribution.
func writeLatency(w io.Writer, rows []LatencyRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nlatency: percentiles of all repetitions and guests of a group merged")
	for _, b := range latencyBlocks(rows) {
		if b.Title != "" {
			fmt.Fprintln(w, "\n"+termtext.Safe(b.Title))
		}
		table := [][]string{{"workload / metric", "group", "p50", "p90", "p99", "p99.9", "min", "mean", "max", "stddev", "unit", "n"}}
		for _, r := range b.Rows {
			line := append([]string{r.WorkloadID + " " + r.Metric, r.Label()}, latencyFigures(r.Hist)...)
			table = append(table, append(line, r.Unit, fmt.Sprint(r.Hist.Count())))
		}
		writeAligned(w, table, func(int, int) int { return 0 }, false)
	}
	if note := latencyNote(rows); note != "" {
		fmt.Fprintln(w, "note: "+note)
	}
}

// latencyFigures are a distribution's percentiles, then its min, mean, max
// and stddev, formatted, as both renderings show them.
func latencyFigures(h *stats.Histogram) []string {
	var out []string
	for _, p := range latencyPercentiles {
		out = append(out, formatValue(h.Quantile(p.Q)))
	}
	return append(out, formatValue(h.Min()), formatValue(h.Mean()), formatValue(h.Max()), formatValue(h.StdDev()))
}

// costNote says what the tool CPU figures leave out; both renderings print it.
const costNote = "user + system CPU time of the measuring tool's own processes; work the kernel does for it " +
	"elsewhere (softirq on another CPU, the peer's server) is not in it"

// writeCost prints the tool's CPU time per execution and per unit of work.
func writeCost(w io.Writer, rows []CostRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntool CPU: "+costNote)
	table := [][]string{{"workload", "group", "n", "CPU/exec", "cores", "CPU per unit of work", "vs baseline ↓"}}
	for _, r := range rows {
		per, ratio := "—", ""
		if pu := r.PerUnit; pu != nil {
			per = formatValue(pu.Summary.Mean) + " " + pu.Unit
			ratio = "n/a"
			if n := pu.Ratio; n != nil {
				ratio = formatRatio(n.Ratio)
				if half := n.CIHigh - n.Ratio; half > 0 {
					ratio += " ±" + formatRatio(half)
				}
			}
		}
		table = append(table, []string{r.WorkloadID, r.Label(), fmt.Sprint(r.Executions), formatValue(r.CPUSeconds.Mean) + " s",
			formatValue(r.Cores.Mean), per, ratio})
	}
	writeAligned(w, table, func(int, int) int { return 0 }, false)
}

// splitNotSupported tells the steps a guest could not run (its kernel or
// its isolation lacks what the workload needs: workload.ErrNotSupported)
// from those that failed.
func splitNotSupported(all []store.Failure) (failed, notSupported []store.Failure) {
	for _, f := range all {
		if strings.HasPrefix(f.Error, workload.ErrNotSupported.Error()) {
			notSupported = append(notSupported, f)
		} else {
			failed = append(failed, f)
		}
	}
	return failed, notSupported
}

func writeFailures(w io.Writer, all []store.Failure) {
	failed, notSupported := splitNotSupported(all)
	if len(notSupported) > 0 {
		fmt.Fprintf(w, "\nnot supported (once per guest group; its other steps of the workload were not run):\n")
		for _, f := range notSupported {
			fmt.Fprintln(w, termtext.Safe(fmt.Sprintf("  %s: %s: %s", f.Group, failureStep(f), strings.TrimPrefix(firstLine(f.Error), workload.ErrNotSupported.Error()+": "))))
		}
	}
	if len(failed) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d failure(s):\n", len(failed))
	for _, f := range failed {
		what := failureStep(f)
		if rep := failureRep(f); rep != "" {
			what += " rep " + rep
		}
		line := fmt.Sprintf("  %s: %s: %s", f.Guest, what, firstLine(f.Error))
		if first := firstLine(f.Stderr); first != "" && !strings.Contains(f.Error, first) {
			line += " — " + first
		}
		fmt.Fprintln(w, termtext.Safe(line))
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// writeAligned prints rows as left-aligned columns; verdict(i, j) > 0
// colours a cell green, < 0 red, when color is set.
func writeAligned(w io.Writer, rows [][]string, verdict func(i, j int) int, color bool) {
	for _, line := range alignLines(rows, verdict, color) {
		fmt.Fprintln(w, line)
	}
}

func columnWidths(rows [][]string) []int {
	var widths []int
	for _, r := range rows {
		for i, s := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	return widths
}

// alignLines lays rows out as left-aligned columns, one line per row.
// Cells name stored things (groups, workloads, metrics), escaped here
// before they are measured or coloured.
func alignLines(rows [][]string, verdict func(i, j int) int, color bool) []string {
	safe := make([][]string, len(rows))
	for i, r := range rows {
		safe[i] = make([]string, len(r))
		for j, s := range r {
			safe[i][j] = termtext.Safe(s)
		}
	}
	rows = safe
	widths := columnWidths(rows)
	lines := make([]string, 0, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for j, s := range r {
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(s))
			if v := verdict(i, j); color && v != 0 {
				code := ansiGreen
				if v < 0 {
					code = ansiRed
				}
				s = code + s + ansiReset
			}
			b.WriteString(s + pad)
			if j < len(r)-1 {
				b.WriteString("  ")
			}
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return lines
}
