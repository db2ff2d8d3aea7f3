package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/workload"
)

type acrossHTMLData struct {
	Scenario  string
	Where     string
	Machines  []acrossHTMLMachine
	IndexNote string
	// IndexRows is the overhead index per group and machine, the header first.
	IndexRows [][]string
	// FootprintNote and FootprintRows are the footprint index the same
	// way; no rows for runs without launch and density rows.
	FootprintNote string
	FootprintRows [][]string
	Charts        []chart
	Blocks        []acrossHTMLBlock
	CSVHref       template.URL
	JSONHref      template.URL
}

type acrossHTMLMachine struct {
	Label, Run, Origin, Status, Started, Host, Hash, Baseline string
}

type acrossHTMLBlock struct {
	Label   string
	Columns []string
	Rows    []htmlRow
}

// WriteAcrossHTML writes the comparison across machines as a page in the
// style of the run report: the machines, each group's overhead index on
// each, a plot per metric of every machine's groups against their own
// baseline, then a table per machine.
func WriteAcrossHTML(w io.Writer, a Across) error {
	var csvBuf, jsonBuf bytes.Buffer
	if err := WriteAcrossCSV(&csvBuf, a); err != nil {
		return err
	}
	if err := WriteAcrossJSON(&jsonBuf, a); err != nil {
		return err
	}
	d := acrossHTMLData{Scenario: a.Scenario, Where: a.where(),
		IndexRows: a.indexRows(a.sharedIndex(workload.RolePerformance)), IndexNote: a.sharedCount(workload.RolePerformance),
		CSVHref:  template.URL("data:text/csv;base64," + base64.StdEncoding.EncodeToString(csvBuf.Bytes())),
		JSONHref: template.URL("data:application/json;base64," + base64.StdEncoding.EncodeToString(jsonBuf.Bytes()))}
	if a.has(workload.RoleFootprint) {
		d.FootprintRows, d.FootprintNote = a.indexRows(a.sharedIndex(workload.RoleFootprint)), a.sharedCount(workload.RoleFootprint)
	}
	for _, m := range a.Machines {
		run := m.Comparison.Run
		d.Machines = append(d.Machines, acrossHTMLMachine{Label: m.Label, Run: strconv.FormatInt(run.ID, 10), Origin: run.Origin, Status: run.Status,
			Started: run.Started.UTC().Format(time.DateTime + " UTC"), Host: hostLine(run.Host), Hash: run.ScenarioHash, Baseline: run.Baseline})
		b := acrossHTMLBlock{Label: m.title()}
		for _, col := range m.Comparison.Columns {
			b.Columns = append(b.Columns, col.Label())
		}
		for _, r := range m.Comparison.Rows {
			b.Rows = append(b.Rows, htmlRowOf(r.Entry(), r.Metric, r.Unit, r.Better, r.Cells))
		}
		d.Blocks = append(d.Blocks, b)
	}
	for i, r := range a.Rows {
		var bars []ratioBar
		for _, m := range a.Machines {
			for j, cell := range m.Comparison.Rows[i].Cells {
				col := m.Comparison.Columns[j]
				bars = append(bars, ratioBar{Label: m.Label + " · " + col.Label(), Cell: cell, Better: r.Better, Baseline: col.Baseline})
			}
		}
		if ch, ok := ratioChart(fmt.Sprintf("%s · %s %s", r.Entry(), r.Metric, arrow(string(r.Better))), bars); ok {
			d.Charts = append(d.Charts, ch)
		}
	}
	return acrossTemplate.Execute(w, d)
}

var acrossTemplate = parsePage("across", acrossHTML)

const acrossHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vfleet · {{.Scenario}} {{.Where}}</title>
<style>
` + pageCSS + `</style>
</head>
<body>
<h1>vfleet · {{.Scenario}} {{.Where}}</h1>
<p class="muted">Each machine's groups against its own baseline = 1.00: a ratio says what a group costs on that
machine, the figure beside it what the machine does.</p>

<h2>Machines</h2>
<table>
<tr><th>machine</th><th>run</th><th>status</th><th>started</th><th>host</th><th>baseline</th><th>scenario</th></tr>
{{range .Machines}}<tr><th>{{.Label}}</th><td>{{.Run}}{{with .Origin}}<br><span class="muted">measured on {{.}}</span>{{end}}</td><td><span class="status {{.Status}}">{{.Status}}</span></td><td>{{.Started}}</td>
<td>{{.Host}}</td><td>{{.Baseline}}</td><td class="muted">sha256 {{printf "%.12s" .Hash}}</td></tr>
{{end}}</table>

<h2>Overhead index</h2>
<p class="muted">Geometric mean over the workloads of each performance metric's ratio to the machine's baseline (inverted
where lower is better, so above 1.00 is always better) {{.IndexNote}}, with a 95% interval.</p>
<table>
{{range $i, $r := .IndexRows}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{with .FootprintRows}}
<h2>Footprint index</h2>
<p class="muted">The same over the fleet's launch and idle density rows (start-up, memory, disk, idle CPU), kept out of
the overhead index {{$.FootprintNote}}; "no interval": a figure measured once, nothing to bound it.</p>
<table>
{{range $i, $r := .}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}

<h2>Each metric on each machine</h2>
<p class="muted">Bars: each group's mean relative to its machine's baseline; whiskers: 95% confidence interval; dashed
line: 1.00. ↑ higher is better, ↓ lower is better. Green/red: better/worse beyond the interval.</p>
{{range .Charts}}{{template "barchart" .}}{{end}}

{{range .Blocks}}<h2>{{.Label}}</h2>
<table>
<tr><th>workload</th><th>metric</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{template "rows" .Rows}}</table>
{{end}}
<p><a download="vfleet-across.csv" href="{{.CSVHref}}">Download every machine's figures (CSV)</a> ·
<a download="vfleet-across.json" href="{{.JSONHref}}">Download the comparison (JSON)</a></p>
</body>
</html>
`
