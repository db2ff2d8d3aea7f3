package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"time"

	"github.com/vfleet/vfleet/internal/store"
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
)

func buildCharts(c Comparison) []chart {
	var charts []chart
	index := map[string]int{}
	maxX := map[string]float64{}
	for _, r := range c.Rows {
		for _, cell := range r.Cells {
			if cell.Comparable && !math.IsNaN(cell.Normalized.CIHigh) {
				maxX[r.WorkloadID] = math.Max(maxX[r.WorkloadID], cell.Normalized.CIHigh)
			}
		}
	}
	for _, r := range c.Rows {
		i, ok := index[r.WorkloadID]
		if !ok {
			i = len(charts)
			index[r.WorkloadID] = i
			charts = append(charts, chart{Title: r.WorkloadID, Width: chartWidth})
		}
		ch := &charts[i]
		scale := plotWidth / niceMax(maxX[r.WorkloadID])
		for j, cell := range r.Cells {
			if !cell.Comparable {
				continue
			}
			y := chartMargin + len(ch.Bars)*(barHeight+barGap)
			n := cell.Normalized
			b := bar{
				Y: y, H: barHeight, X0: labelWidth, W: math.Max(0, n.Ratio) * scale,
				LoX: labelWidth + math.Max(0, n.CILow)*scale, HiX: labelWidth + math.Max(0, n.CIHigh)*scale,
				MidY:  float64(y) + barHeight/2,
				Label: fmt.Sprintf("%s %s · %s", r.Metric, arrow(string(r.Better)), c.Columns[j].Label()),
				Value: formatRatio(n.Ratio), Whisker: n.CIHigh > n.CILow,
			}
			switch v := verdict(cell, string(r.Better)); {
			case c.Columns[j].Baseline:
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
		ch.OneX = labelWidth + scale
		ch.Height = chartMargin*2 + len(ch.Bars)*(barHeight+barGap)
		ch.Ticks = nil
		for t := 0.0; t <= niceMax(maxX[r.WorkloadID])+1e-9; t += 0.25 {
			ch.Ticks = append(ch.Ticks, tick{X: labelWidth + t*scale, Label: formatRatio(t)})
		}
	}
	return charts
}

// niceMax is the axis end: at least 1.25 so the reference line never sits
// at the edge, rounded up to a quarter.
func niceMax(v float64) float64 {
	v = math.Max(v*1.05, 1.25)
	return math.Ceil(v*4) / 4
}

type htmlData struct {
	Run      store.Run
	Duration string
	Scenario string
	Columns  []Column
	Index    []htmlIndex
	Rows     []htmlRow
	Charts   []chart
	Failures []store.Failure
	Tools    [][2]string
	CSVHref  template.URL
	Complete bool
}

type htmlIndex struct {
	Label, Value, Class string
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
	var csvBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, samples); err != nil {
		return err
	}
	d := htmlData{
		Run: c.Run, Scenario: string(c.Run.ScenarioText), Columns: c.Columns, Charts: buildCharts(c),
		Failures: c.Failures, Complete: c.Run.Status == store.StatusComplete,
		CSVHref: template.URL("data:text/csv;base64," + base64.StdEncoding.EncodeToString(csvBuf.Bytes())),
	}
	if !c.Run.Finished.IsZero() {
		d.Duration = c.Run.Finished.Sub(c.Run.Started).Round(time.Second).String()
	}
	for _, k := range sortedStrings(c.Run.Host.ToolVersions) {
		d.Tools = append(d.Tools, [2]string{k, c.Run.Host.ToolVersions[k]})
	}
	for j, col := range c.Columns {
		hi := htmlIndex{Label: col.Label(), Value: formatEstimate(c.Index[j])}
		if e := c.Index[j]; !col.Baseline && e.Low > 1 {
			hi.Class = "better"
		} else if !col.Baseline && e.High < 1 {
			hi.Class = "worse"
		}
		d.Index = append(d.Index, hi)
	}
	for _, r := range c.Rows {
		hr := htmlRow{Workload: r.WorkloadID, Metric: r.Metric, Unit: r.Unit, Arrow: arrow(string(r.Better))}
		for _, cell := range r.Cells {
			hc := htmlCell{Ratio: "—"}
			if cell.Present {
				hc.Raw = formatValue(cell.Summary.Mean) + " " + r.Unit
				hc.Ratio = "n/a"
				if cell.Comparable {
					hc.Ratio = formatRatio(cell.Normalized.Ratio)
					hc.CI = "[" + formatRatio(cell.Normalized.CILow) + ", " + formatRatio(cell.Normalized.CIHigh) + "]"
				}
				switch verdict(cell, string(r.Better)) {
				case 1:
					hc.Class = "better"
				case -1:
					hc.Class = "worse"
				}
			}
			hr.Cells = append(hr.Cells, hc)
		}
		d.Rows = append(d.Rows, hr)
	}
	return pageTemplate.Execute(w, d)
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"px": func(f float64) string { return fmt.Sprintf("%.1f", f) },
}).Parse(pageHTML))
