package report

import (
	"fmt"
	"io"
	"strconv"
)

type seriesHTMLData struct {
	Scenario, Machine, Method string
	Runs                      int
	TextChanged               string
	Metrics                   []seriesHTMLMetric
}

type seriesHTMLMetric struct {
	Title string
	Plot  *lineChart
	// Rows are the table, its header first.
	Rows    [][]string
	Changes string
}

// WriteSeriesHTML writes the series as a page: per headline metric a
// line plot of each group's mean over the runs with its interval, the
// change points as dashed lines in the group's colour, and the table.
func WriteSeriesHTML(w io.Writer, s RunSeries) error {
	d := seriesHTMLData{Scenario: s.Scenario, Machine: s.Machine, Method: seriesMethod(s.Options), Runs: len(s.Runs)}
	if s.textChanged() {
		d.TextChanged = textChangedNote
	}
	for _, m := range s.Metrics {
		title := fmt.Sprintf("%s · %s %s", m.Entry(), m.Metric, arrow(string(m.Better)))
		hm := seriesHTMLMetric{Title: title}
		// x is the run's place in the series, named by its id: ids follow
		// the order runs reached this store (an imported run's is new),
		// not the order they ran in.
		p := linePlot{Title: title, XLabel: "run", YLabel: m.Metric, YUnit: m.Unit,
			XName: func(x float64) string { return strconv.FormatInt(s.Runs[int(x)].ID, 10) }}
		for gi, g := range m.Groups {
			line := Series{Label: g.Label()}
			for i, cell := range g.Cells {
				if cell.Present {
					sm := cell.Summary
					line.Points = append(line.Points, Point{X: float64(i), Y: sm.Mean, Low: sm.CILow, High: sm.CIHigh, N: sm.N})
				}
			}
			p.Series = append(p.Series, line)
			for _, cp := range g.ChangePoints {
				id := s.Runs[cp.Index].ID
				p.Rules = append(p.Rules, Rule{X: float64(cp.Index), Series: gi, Title: fmt.Sprintf("%s changed at run %d (p=%.3g)", g.Label(), id, cp.P)})
			}
		}
		hm.Rows, hm.Changes = s.rows(m), s.changeText(m)
		if ch, ok := buildLinePlot(p); ok {
			hm.Plot = &ch
		}
		d.Metrics = append(d.Metrics, hm)
	}
	return seriesTemplate.Execute(w, d)
}

var seriesTemplate = parsePage("series", seriesHTML)

const seriesHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vfleet · {{.Scenario}} over time on {{.Machine}}</title>
<style>
` + pageCSS + `</style>
</head>
<body>
<h1>vfleet · {{.Scenario}} over time on {{.Machine}}</h1>
<p>{{.Runs}} complete runs in start order. Points: each group's mean in a run, with its 95% confidence interval;
dashed lines and ` + seriesMarker + `: the first run of a new level, in the group's colour.</p>
<p class="muted">{{.Method}}.</p>
{{with .TextChanged}}<p><strong>Note:</strong> {{.}}.</p>{{end}}
{{range .Metrics}}<h2>{{.Title}}</h2>
{{with .Plot}}{{template "linechart" .}}{{end}}
<p><strong>{{.Changes}}</strong></p>
<table>
{{range $i, $r := .Rows}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{else}}<p>No metric was measured in these runs.</p>
{{end}}</body>
</html>
`
