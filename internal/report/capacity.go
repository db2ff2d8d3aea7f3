package report

import (
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

// CapacityChart is one SLO of a capacity search against fleet size: the
// figure it bounds at each size measured, with its interval, the bound,
// and the answer.
type CapacityChart struct {
	SLO    string
	Unit   string
	Bound  float64
	Answer int // 0: no size held
	Points []Point
}

// CapacityPage is the HTML page of a capacity search.
type CapacityPage struct {
	Title    string
	Headline string
	// Table is the search's table as text, every size with its verdicts.
	Table  string
	Charts []CapacityChart
	// Host is where the search ran, shown as a run's environment is.
	Host hostinfo.Fingerprint
}

type capacityChart struct {
	lineChart
}

// WriteCapacityHTML writes the page: the answer, a plot per SLO with the
// sizes measured, the bound as a line and the answer marked, the table.
func WriteCapacityHTML(w io.Writer, p CapacityPage) error {
	var charts []capacityChart
	for _, c := range p.Charts {
		if ch, ok := buildLinePlot(capacityPlot(c)); ok {
			charts = append(charts, capacityChart{ch})
		}
	}
	return capacityTemplate.Execute(w, struct {
		CapacityPage
		Plots []capacityChart
		Env   [][2]string
	}{p, charts, environment(p.Host)})
}

// capacityPlot lays a chart out as three series: what was measured, the
// bound across the sizes, the answer on the curve.
func capacityPlot(c CapacityChart) linePlot {
	lo, hi := math.Inf(1), math.Inf(-1)
	var answer []Point
	for _, pt := range c.Points {
		lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
		if int(pt.X) == c.Answer {
			answer = append(answer, Point{X: pt.X, Y: pt.Y})
		}
	}
	series := []Series{{Label: "measured, with its interval", Points: c.Points},
		{Label: fmt.Sprintf("bound: %s", formatQuantity(c.Bound, c.Unit)), Points: []Point{{X: lo, Y: c.Bound}, {X: hi, Y: c.Bound}}}}
	if len(answer) > 0 {
		series = append(series, Series{Label: fmt.Sprintf("answer: %d", c.Answer), Points: answer})
	}
	return linePlot{Title: c.SLO, XLabel: "fleet size", YLabel: c.SLO, YUnit: c.Unit, LogX: hi >= 8*lo, Series: series}
}

var capacityTemplate = template.Must(template.Must(template.New("capacity").Funcs(templateFuncs).Parse(capacityHTML)).Parse(lineChartHTML))

const capacityHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
` + pageCSS + `</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p><strong>{{.Headline}}</strong></p>
{{range .Plots}}<h3>{{.Title}}</h3>
{{template "linechart" .}}
{{end}}
<h2>Every size measured</h2>
<pre>{{.Table}}</pre>
<h2>Environment</h2>
<table>
{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
</body>
</html>
`
