package report

// pageHTML is the report page. Its CSS and SVG are inline on purpose: the
// page must render with no network and no server.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vfleet run {{.Run.ID}} · {{.Run.ScenarioName}}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #1d2328; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #d8dde2; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: .3rem; font-weight: 600; }
.status.complete { background: #e3f3e6; color: #1f6b30; } .status.incomplete, .status.failed, .status.running { background: #fde8e4; color: #9b2c1a; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { padding: .25rem .6rem; text-align: left; border-bottom: 1px solid #eceff2; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.better { color: #1f6b30; } .worse { color: #9b2c1a; } .muted { color: #66717c; }
svg { display: block; margin: .5rem 0 1.5rem; } svg text { font: 12px system-ui, sans-serif; fill: #1d2328; }
rect.better { fill: #5aa86a; } rect.worse { fill: #d0664f; } rect.same { fill: #8fa3b5; } rect.baseline { fill: #c2c9d0; }
line.ref { stroke: #1d2328; stroke-dasharray: 4 3; } line.ci { stroke: #1d2328; stroke-width: 1.5; } line.grid { stroke: #eceff2; }
pre { background: #f5f7f9; padding: .8rem; overflow-x: auto; }
</style>
</head>
<body>
<h1>vfleet run {{.Run.ID}} · {{.Run.ScenarioName}}</h1>
<p><span class="status {{.Run.Status}}">{{.Run.Status}}</span>
{{if not .Complete}}<strong>This run did not complete: the figures cover only what was measured.</strong>{{end}}</p>
<p class="muted">Started {{fmtTime .Run.Started}} · finished {{fmtTime .Run.Finished}}{{if .Duration}} · {{.Duration}}{{end}} ·
baseline <strong>{{.Run.Baseline}}</strong> = 1.00 · scenario {{.Run.ScenarioSource}} (sha256 {{printf "%.12s" .Run.ScenarioHash}})</p>

<h2>Environment</h2>
<table>
{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>

<h2>Overhead index</h2>
<p class="muted">Geometric mean over the workloads of each metric's ratio to the baseline (inverted where lower is
better, so above 1.00 is always better), with a 95% bootstrap interval.</p>
<table>
{{range .Index}}<tr><th>{{.Label}}</th><td class="num {{.Class}}">{{.Value}}</td></tr>
{{end}}</table>

<h2>Normalised to the baseline</h2>
<p class="muted">Bars: each group's mean relative to the baseline's; whiskers: 95% confidence interval; dashed line: 1.00.
↑ higher is better, ↓ lower is better. Green/red: better/worse beyond the interval.</p>
{{range $c := .Charts}}
<h3>{{.Title}}</h3>
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}} normalised to the baseline">
{{range .Ticks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="14" y2="{{$c.Height}}"/><text x="{{px .X}}" y="12" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="0" y="{{px .MidY}}" dominant-baseline="middle">{{.Label}}</text>
<rect class="{{.Class}}" x="{{px .X0}}" y="{{.Y}}" width="{{px .W}}" height="{{.H}}"><title>{{.Label}}: {{.Value}}</title></rect>
{{if .Whisker}}<line class="ci" x1="{{px .LoX}}" x2="{{px .HiX}}" y1="{{px .MidY}}" y2="{{px .MidY}}"/>{{end}}
<text x="{{px .HiX}}" dx="6" y="{{px .MidY}}" dominant-baseline="middle">{{.Value}}</text>
{{end}}<line class="ref" x1="{{px .OneX}}" x2="{{px .OneX}}" y1="14" y2="{{.Height}}"/>
</svg>
{{end}}

<h2>Comparison table</h2>
<table>
<tr><th>workload</th><th>metric</th>{{range .Columns}}<th>{{.Label}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Workload}}</td><td>{{.Metric}} {{.Arrow}}</td>{{range .Cells}}<td class="num {{.Class}}">{{.Ratio}}{{if .Raw}}<br><span class="muted">{{.Raw}}</span>{{end}}{{if .CI}}<br><span class="muted">{{.CI}}</span>{{end}}</td>{{end}}</tr>
{{end}}</table>
{{if .NonFinite}}<p><strong>Note:</strong> {{.NonFinite}}</p>{{end}}
<p><a download="vfleet-run-{{.Run.ID}}.csv" href="{{.CSVHref}}">Download every raw sample (CSV)</a></p>

{{if .Failures}}<h2>Failures</h2>
<table><tr><th>guest</th><th>workload</th><th>repetition</th><th>error</th></tr>
{{range .Failures}}<tr><td>{{.Guest}}</td><td>{{failureStep .}}</td><td>{{failureRep .}}</td><td>{{.Error}}{{if .Stderr}}<pre>{{stderrTail .Stderr}}</pre>{{end}}</td></tr>
{{end}}</table>{{end}}

<h2>Scenario</h2>
<pre>{{.Scenario}}</pre>
</body>
</html>
`
