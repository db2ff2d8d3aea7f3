package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// chart is one workload's horizontal bar chart of normalised values.
type chart struct {
	Title  string
	Width  int
	Height int
	OneX   float64 // x of the 1.00 reference line
	Bars   []bar
	Ticks  []tick
}

type bar struct {
	Y, H           int
	X0, W          float64
	LoX, HiX, MidY float64
	Label          string
	Value          string
	Class          string // better, worse, same, baseline
	Whisker        bool
	TextX          float64 // where the value is written, when not after the whisker
	Anchor         string  // its text-anchor
}

type tick struct {
	X     float64
	Label string
}

const (
	chartWidth  = 720
	labelWidth  = 260
	plotWidth   = chartWidth - labelWidth - 70
	barHeight   = 16
	barGap      = 6
	chartMargin = 24
	axisTicks   = 8
)

func buildCharts(c Comparison) []chart {
	var titles []string
	bars := map[string][]ratioBar{}
	for _, r := range c.Rows {
		if _, ok := bars[r.Entry()]; !ok {
			titles = append(titles, r.Entry())
		}
		for j, cell := range r.Cells {
			bars[r.Entry()] = append(bars[r.Entry()], ratioBar{Label: fmt.Sprintf("%s %s · %s", r.Metric, arrow(string(r.Better)), c.Columns[j].Label()),
				Cell: cell, Better: r.Better, Baseline: c.Columns[j].Baseline})
		}
	}
	var charts []chart
	for _, t := range titles {
		// A workload with no baseline value has nothing to plot.
		if ch, ok := ratioChart(t, bars[t]); ok {
			charts = append(charts, ch)
		}
	}
	return charts
}

// ratioBar is one bar of a chart of ratios to a baseline.
type ratioBar struct {
	Label    string
	Cell     Cell
	Better   workload.Better
	Baseline bool
}

// ratioChart lays out the bars whose cells have a ratio, each with its
// interval as a whisker, on an axis from 0 that holds them all; ok is
// false when none has a ratio.
func ratioChart(title string, items []ratioBar) (chart, bool) {
	// Long labels (a machine's with a group's) widen the label column,
	// about 7 px a character, rather than run into the bars.
	left := float64(labelWidth)
	maxX := 0.0
	for _, it := range items {
		if it.Cell.Comparable {
			maxX = math.Max(maxX, it.Cell.Normalized.CIHigh)
			left = math.Max(left, 7*float64(utf8.RuneCountInString(it.Label))+12)
		}
	}
	ch := chart{Title: title, Width: int(left) + chartWidth - labelWidth}
	end, step := axis(maxX)
	scale := plotWidth / end
	for _, it := range items {
		if !it.Cell.Comparable {
			continue
		}
		y := chartMargin + len(ch.Bars)*(barHeight+barGap)
		n := it.Cell.Normalized
		b := bar{
			Y: y, H: barHeight, X0: left, W: math.Max(0, n.Ratio) * scale,
			LoX: left + math.Max(0, n.CILow)*scale, HiX: left + math.Max(0, n.CIHigh)*scale,
			MidY:  float64(y) + barHeight/2,
			Label: it.Label, Value: formatRatio(n.Ratio), Whisker: n.CIHigh > n.CILow,
		}
		switch v := verdict(it.Cell, string(it.Better)); {
		case it.Baseline:
			b.Class = "baseline"
		case v > 0:
			b.Class = "better"
		case v < 0:
			b.Class = "worse"
		default:
			b.Class = "same"
		}
		ch.Bars = append(ch.Bars, b)
	}
	if len(ch.Bars) == 0 {
		return ch, false
	}
	ch.OneX = left + scale
	ch.Height = chartMargin*2 + len(ch.Bars)*(barHeight+barGap)
	// Ticks are counted, not summed, so rounding cannot drop the last one.
	for k := 0; float64(k)*step <= end+1e-9; k++ {
		t := float64(k) * step
		ch.Ticks = append(ch.Ticks, tick{X: left + t*scale, Label: formatRatio(t)})
	}
	return ch, true
}

// axis picks a chart's end and tick step: the end is at least 1.25 so the
// reference line never sits at the edge, and the step grows (0.25, 0.5, 1,
// 2.5, 5, 10, 25...) so that a far outlier still leaves a readable axis of
// at most axisTicks steps.
func axis(maxRatio float64) (end, step float64) {
	end = math.Max(maxRatio*1.05, 1.25)
	step = 0.25
	for k := 0; end/step > axisTicks; k++ {
		step *= [...]float64{2, 2, 2.5}[k%3]
	}
	return math.Ceil(end/step) * step, step
}

type htmlData struct {
	Run      store.Run
	Duration string
	Scenario string
	Columns  []Column
	Index    []htmlIndex
	// Footprint is the footprint index, nil for a run without one.
	Footprint []htmlIndex
	Rows      []htmlRow
	Charts    []chart
	Failures  []store.Failure
	// NotSupported are the steps a guest group could not run, apart from
	// the failures.
	NotSupported []store.Failure
	Env          [][2]string // the host fingerprint and tool versions, as label and value
	// PeerEnv is a remote network peer's, its URL first; nil for the
	// local peer.
	PeerEnv [][2]string
	CSVHref template.URL
	// JSONHref is the document WriteJSON produces, for a reader who wants
	// the summaries as well as the raw samples.
	JSONHref template.URL
	Complete bool
	// NonFinite explains sample values left out of the statistics.
	NonFinite string
	// SharedCPUs says which groups' guests shared CPUs; empty if none did.
	SharedCPUs string
	// HostLoad says the host was busy during the steps, or that its load
	// was not read; empty for a quiet host.
	HostLoad string
	Latency  []htmlLatencyBlock
	CDFs     []cdfChart
	// LatencyNote explains histograms left out of the percentiles.
	LatencyNote string
	Cost        []htmlCost
	CostNote    string
	Scaling     []scalingChart
	// Interference is nil unless the run measured alone and together.
	Interference *htmlInterference
	// Audit is nil for a run without an isolation audit.
	Audit *auditTable
	// Frontier is nil unless at least two groups have both an overhead
	// index and an audit; FrontierRows are its points as a table, the
	// header first.
	Frontier     *frontierChart
	FrontierRows [][]string
	FrontierNote string
}

type htmlCost struct {
	Workload, Label, Executions, CPU, Wall, Cores string
	PerUnit, PerUnitCI, Ratio, RatioCI, Class     string
}

// scalingChart is a ScalingCurve laid out, with what its entries share.
type scalingChart struct {
	lineChart
	Fixed string
}

type htmlLatencyBlock struct {
	Title string
	Rows  []htmlLatency
}

type htmlLatency struct {
	Workload, Metric, Label, Unit string
	Figures                       []string // latencyPercentiles, then min, mean, max, stddev
	Count                         uint64
}

type htmlIndex struct {
	Label, Value, Class string
}

// htmlIndexes are an index's cells, coloured where a group is better or
// worse than the baseline beyond the index's interval.
func htmlIndexes(cols []Column, index []stats.Estimate) []htmlIndex {
	var out []htmlIndex
	for j, col := range cols {
		hi := htmlIndex{Label: col.Label(), Value: formatEstimate(index[j])}
		if e := index[j]; !col.Baseline && e.Low > 1 {
			hi.Class = "better"
		} else if !col.Baseline && e.High < 1 {
			hi.Class = "worse"
		}
		out = append(out, hi)
	}
	return out
}

type htmlRow struct {
	Workload, Metric, Unit, Arrow string
	Cells                         []htmlCell
}

type htmlCell struct {
	Ratio, Raw, CI, Class string
}

// WriteHTML writes a self-contained page: no script, style or image is
// fetched from anywhere, so it opens from a file or an e-mail attachment.
func WriteHTML(w io.Writer, c Comparison, samples []store.Sample) error {
	var csvBuf, jsonBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, samples); err != nil {
		return err
	}
	if err := WriteJSON(&jsonBuf, c, samples); err != nil {
		return err
	}
	failed, notSupported := splitNotSupported(c.Failures)
	d := htmlData{
		Run: c.Run, Scenario: string(c.Run.ScenarioText), Columns: c.Columns, Charts: buildCharts(c),
		Failures: failed, NotSupported: notSupported, Complete: c.Run.Status == store.StatusComplete, NonFinite: nonFiniteNote(c.NonFinite),
		SharedCPUs: sharedCPUsNote(c.Run), HostLoad: loadNote(c.Load),
		CSVHref:  template.URL("data:text/csv;base64," + base64.StdEncoding.EncodeToString(csvBuf.Bytes())),
		JSONHref: template.URL("data:application/json;base64," + base64.StdEncoding.EncodeToString(jsonBuf.Bytes())),
		Cost:     htmlCostRows(c.Cost), CostNote: costNote, Scaling: buildScalingCharts(c.Scaling),
		Audit: buildAuditTable(c.Audit, c.Columns),
	}
	if pts := frontierOf(c); pts != nil {
		d.Frontier, d.FrontierRows, d.FrontierNote = buildFrontierChart(pts), frontierRows(pts), frontierNote
	}
	if !c.Run.Finished.IsZero() {
		d.Duration = c.Run.Finished.Sub(c.Run.Started).Round(time.Second).String()
	}
	d.Env = environment(c.Run.Host)
	if c.Run.Origin != "" {
		d.Env = append([][2]string{{"measured on", c.Run.Origin}}, d.Env...)
	}
	if c.Load != nil {
		d.Env = append(d.Env, [2]string{"host load during the steps", loadSummary(c.Load)})
	}
	if url, fp, ok := c.Run.RemotePeer(); ok {
		d.PeerEnv = append([][2]string{{"peer", url}}, environment(fp)...)
	}
	d.CDFs, d.LatencyNote = buildCDFCharts(c.Latency), latencyNote(c.Latency)
	for _, b := range latencyBlocks(c.Latency) {
		hb := htmlLatencyBlock{Title: b.Title}
		for _, r := range b.Rows {
			hb.Rows = append(hb.Rows, htmlLatency{Workload: r.WorkloadID, Metric: r.Metric, Label: r.Label(), Unit: r.Unit,
				Count: r.Hist.Count(), Figures: latencyFigures(r.Hist)})
		}
		d.Latency = append(d.Latency, hb)
	}
	d.Index = htmlIndexes(c.Columns, c.Index)
	if c.Footprint != nil {
		d.Footprint = htmlIndexes(c.Columns, c.Footprint)
	}
	for _, r := range c.Rows {
		d.Rows = append(d.Rows, htmlRowOf(r.Entry(), r.Metric, r.Unit, r.Better, r.Cells))
	}
	if m := c.Interference; m != nil {
		d.Interference = &htmlInterference{}
		for _, col := range m.Columns {
			d.Interference.Columns = append(d.Interference.Columns, col.Label)
		}
		for _, r := range m.Rows {
			d.Interference.Rows = append(d.Interference.Rows, htmlRowOf(r.Entry(), r.Metric, r.Unit, r.Better, r.Cells))
		}
	}
	return pageTemplate.Execute(w, d)
}

// htmlInterference is the consolidation matrix as the page shows it.
type htmlInterference struct {
	Columns []string
	Rows    []htmlRow
}

func htmlRowOf(entry, metric, unit string, better workload.Better, cells []Cell) htmlRow {
	hr := htmlRow{Workload: entry, Metric: metric, Unit: unit, Arrow: arrow(string(better))}
	for _, cell := range cells {
		hc := htmlCell{Ratio: "—"}
		if cell.Present {
			hc.Raw = formatQuantity(cell.Summary.Mean, unit)
			hc.Ratio = "n/a"
			if cell.Comparable {
				hc.Ratio = formatRatio(cell.Normalized.Ratio)
				// One repetition bounds nothing: say so rather than print
				// an interval of zero width, as the terminal table does.
				hc.CI = "[no interval]"
				if cell.Normalized.CIHigh > cell.Normalized.CILow {
					hc.CI = "[" + formatRatio(cell.Normalized.CILow) + ", " + formatRatio(cell.Normalized.CIHigh) + "]"
				}
			}
			switch verdict(cell, string(better)) {
			case 1:
				hc.Class = "better"
			case -1:
				hc.Class = "worse"
			}
		}
		hr.Cells = append(hr.Cells, hc)
	}
	return hr
}

func htmlCostRows(rows []CostRow) []htmlCost {
	var out []htmlCost
	interval := func(s stats.Summary) string {
		if s.N < 2 {
			return ""
		}
		return "[" + formatValue(s.CILow) + ", " + formatValue(s.CIHigh) + "]"
	}
	for _, r := range rows {
		h := htmlCost{Workload: r.WorkloadID, Label: r.Label(), Executions: strconv.Itoa(r.Executions),
			CPU: formatValue(r.CPUSeconds.Mean) + " s", Wall: formatValue(r.WallSeconds.Mean) + " s", Cores: formatValue(r.Cores.Mean),
			PerUnit: "—"}
		if pu := r.PerUnit; pu != nil {
			h.PerUnit, h.PerUnitCI, h.Ratio = formatValue(pu.Summary.Mean)+" "+pu.Unit, interval(pu.Summary), "n/a"
			if n := pu.Ratio; n != nil {
				h.Ratio = formatRatio(n.Ratio)
				if n.CIHigh > n.CILow {
					h.RatioCI = "[" + formatRatio(n.CILow) + ", " + formatRatio(n.CIHigh) + "]"
				}
				// A cost is better lower: green when its whole interval is below 1.
				switch {
				case n.CIHigh < 1:
					h.Class = "better"
				case n.CILow > 1:
					h.Class = "worse"
				}
			}
		}
		out = append(out, h)
	}
	return out
}

// buildScalingCharts lays out each scaling curve as a line plot.
func buildScalingCharts(curves []ScalingCurve) []scalingChart {
	var out []scalingChart
	for _, sc := range curves {
		ch, ok := buildLinePlot(linePlot{Title: sc.Workload + " · " + sc.Metric + " " + arrow(string(sc.Better)) + " by " + sc.Param,
			XLabel: sc.Param, YLabel: sc.Metric, YUnit: sc.Unit, LogX: sc.LogX, Series: sc.Series})
		if ok {
			out = append(out, scalingChart{lineChart: ch, Fixed: paramString(sc.Fixed)})
		}
	}
	return out
}

// environment lists what the run was measured on, leaving out what the
// fingerprint could not tell rather than printing empty fields.
func environment(h hostinfo.Fingerprint) [][2]string {
	join := func(parts ...string) string {
		var kept []string
		for _, p := range parts {
			if p != "" {
				kept = append(kept, p)
			}
		}
		return strings.Join(kept, " · ")
	}
	labelled := func(label, v string) string {
		if v == "" {
			return ""
		}
		return label + " " + v
	}
	var mem, cpus string
	if h.MemTotalKiB > 0 {
		mem = strconv.FormatFloat(float64(h.MemTotalKiB)/(1<<20), 'f', 1, 64) + " GiB"
	}
	if h.OnlineCPUs > 0 {
		cpus = strconv.Itoa(h.OnlineCPUs) + " online"
	}
	rows := [][2]string{
		{"host", h.Hostname},
		{"kernel", join(h.Kernel, h.KernelFull, h.Arch)},
		{"CPU", join(h.CPUModel, cpus, labelled("SMT", h.SMT), labelled("governor", h.Governor), labelled("microcode", h.Microcode))},
		{"memory", mem},
		{"cgroups", h.CgroupMode},
		{"real-time", join(labelled("preemption", h.RealTime.Preemption), labelled("RT throttling", rtThrottling(h.RealTime)),
			labelled("isolated", h.RealTime.IsolatedCPUs), labelled("nohz_full", h.RealTime.NohzFull),
			hostinfo.DescribeTracers(h.RealTime.Tracers), labelled("set by the run", strings.Join(h.RealTime.SetByRun, ", ")))},
		{"virtualised", h.Virtualized},
		{"NIC", nicLine(h.NIC)},
		{"vfleet", h.VfleetVer},
	}
	for _, k := range sortedStrings(h.ToolVersions) {
		rows = append(rows, [2]string{k, h.ToolVersions[k]})
	}
	kept := rows[:0]
	for _, r := range rows {
		if r[1] != "" {
			kept = append(kept, r)
		}
	}
	return kept
}

// nicLine describes the NIC measured across: name, driver and its
// version, firmware, and the offloads on; empty for none.
func nicLine(n *hostinfo.NIC) string {
	if n == nil {
		return ""
	}
	parts := []string{n.Name, strings.TrimSpace(n.Driver + " " + n.Version)}
	if n.Firmware != "" {
		parts = append(parts, "firmware "+n.Firmware)
	}
	var on []string
	for _, k := range sortedStrings(n.Offloads) {
		if strings.HasPrefix(n.Offloads[k], "on") {
			on = append(on, k)
		}
	}
	if len(on) > 0 {
		parts = append(parts, "offloads on: "+strings.Join(on, ", "))
	}
	return strings.Join(parts, " · ")
}

// rtThrottling says how much of each period real-time tasks may take,
// empty for a fingerprint that did not record it.
func rtThrottling(rt hostinfo.RealTime) string {
	switch {
	case rt.RTRuntimeUS < 0:
		return "off"
	case rt.RTPeriodUS > 0:
		return fmt.Sprintf("%d/%d us", rt.RTRuntimeUS, rt.RTPeriodUS)
	}
	return ""
}

// maxStderrShown bounds each failure's stderr on the page; the store and
// the JSON export keep all of it.
const maxStderrShown = 4096

// templateFuncs serve both pages.
var templateFuncs = template.FuncMap{
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	// A tool's stderr can run to megabytes; its end says why it failed.
	"stderrTail": func(s string) string {
		if len(s) <= maxStderrShown {
			return s
		}
		return "… " + s[len(s)-maxStderrShown:]
	},
	"px":          func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"failureStep": failureStep,
	"failureRep":  failureRep,
	"arr":         func(v ...any) []any { return v },
}

var pageTemplate = parsePage("page", pageHTML)

// parsePage parses a page with the shared parts it may use.
func parsePage(name, text string) *template.Template {
	t := template.Must(template.New(name).Funcs(templateFuncs).Parse(text))
	return template.Must(template.Must(t.Parse(lineChartHTML)).Parse(tableHTML))
}
