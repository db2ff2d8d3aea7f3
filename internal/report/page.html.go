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
` + pageCSS + `</style>
</head>
<body>
<h1>vfleet run {{.Run.ID}} · {{.Run.ScenarioName}}</h1>
<p><span class="status {{.Run.Status}}">{{.Run.Status}}</span>
{{if not .Complete}}<strong>This run is {{.Run.Status}}{{with .Run.StatusReason}} — {{.}}{{end}}; the figures cover only what was measured.</strong>{{end}}</p>
<p class="muted">Started {{fmtTime .Run.Started}} · finished {{fmtTime .Run.Finished}}{{if .Duration}} · {{.Duration}}{{end}} ·
baseline <strong>{{.Run.Baseline}}</strong> = 1.00 · scenario {{.Run.ScenarioSource}} (sha256 {{printf "%.12s" .Run.ScenarioHash}})</p>

<h2>Environment</h2>
<table>
{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
{{with .PeerEnv}}<h2>Network peer</h2>
<table>
{{range .}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
{{end}}
<h2>Overhead index</h2>
<p class="muted">Geometric mean over the workloads of each performance metric's ratio to the baseline (inverted where
lower is better, so above 1.00 is always better), with a 95% interval from the spread of the index between repetitions.</p>
<table>
{{range .Index}}<tr><th>{{.Label}}</th><td class="num {{.Class}}">{{.Value}}</td></tr>
{{end}}</table>
{{with .Footprint}}
<h2>Footprint index</h2>
<p class="muted">The same over the fleet's launch and idle density rows (start-up, memory, disk, idle CPU): what
holding the guests costs, kept out of the overhead index. "no interval": a figure measured once (a fleet launches
once), nothing to bound it.</p>
<table>
{{range .}}<tr><th>{{.Label}}</th><td class="num {{.Class}}">{{.Value}}</td></tr>
{{end}}</table>
{{end}}
{{with .Audit}}
<h2>Isolation audit</h2>
<p class="muted">What each group's first guest could do, from read-only probes run by its agent, against what a
container runtime deploys by default: red weaker, green stronger. Hover a cell for the probe and its raw evidence.</p>
<table>
<tr><th>property</th>{{range .Groups}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}" title="{{.Evidence}}">{{.Text}}</td>{{end}}</tr>
{{end}}<tr><th>vs runtime default</th>{{range .Scores}}<td>{{.}}</td>{{end}}</tr>
</table>
{{if .Attacks}}<h3>Escape attempts</h3>
<p class="muted">Known ways out, tried in each group's first guest, each stopped before it could change anything:
blocked (green, with the kernel's answer), contained (it reached the guest's own kernel, root or namespaces) or
escaped (red: it reached the host). Hover a cell for the technique and its evidence.</p>
<table>
<tr><th>attempt</th>{{range .Groups}}<th>{{.}}</th>{{end}}</tr>
{{range .Attacks}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}" title="{{.Evidence}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .Reach}}<h3>Reachability</h3>
<p class="muted">A TCP handshake from the group's guests to each target; a refusal counts as reached.</p>
<table>
<tr><th>from → to</th>{{range .Targets}}<th>{{.}}</th>{{end}}</tr>
{{range .Reach}}<tr><th>{{.Name}}</th>{{range .Cells}}<td title="{{.Evidence}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{end}}
{{with .Frontier}}{{$c := .}}
<h2>Cost and isolation</h2>
<p class="muted">Purple: {{$.FrontierNote}}; the line joins the frontier. Amber: a group some other beats on both.
Error bars: the index's 95% interval; dashed line: the baseline's 1.00.</p>
<svg class="frontier" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="overhead index against audit score, with the frontier">
{{range .XTicks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="{{px $c.Top}}" y2="{{px $c.Bottom}}"/><text x="{{px .X}}" y="{{px $c.Bottom}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .YTicks}}<line class="grid" x1="{{px $c.Left}}" x2="{{px $c.Right}}" y1="{{px .Y}}" y2="{{px .Y}}"/><text x="{{px $c.Left}}" dx="-6" y="{{px .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{px .Left}}" x2="{{px .Right}}" y1="{{px .Bottom}}" y2="{{px .Bottom}}"/>
<line class="ref" x1="{{px .Left}}" x2="{{px .Right}}" y1="{{px .OneY}}" y2="{{px .OneY}}"/>
<text x="{{px .Left}}" y="{{px .Top}}" dy="-10">overhead index ↑ (cheaper)</text><text x="{{px .Right}}" y="{{px .Bottom}}" dy="34" text-anchor="end">audit score → (more isolated)</text>
{{if .Line}}<polyline class="frontier" points="{{.Line}}"/>
{{end}}{{range .Points}}{{if .Bar}}<path class="errbar frontier-bar" d="M{{px .X}} {{px .LoY}}V{{px .HiY}}M{{px .X}} {{px .LoY}}m-4 0h8M{{px .X}} {{px .HiY}}m-4 0h8"/>
{{end}}<circle class="{{if .OnFrontier}}frontier{{else}}dominated{{end}}" cx="{{px .X}}" cy="{{px .Y}}" r="6"><title>{{.Title}}</title></circle>
<text x="{{px .TextX}}" y="{{px .TextY}}" text-anchor="{{.Anchor}}">{{.Label}}</text>
{{end}}</svg>
<table>
{{range $i, $r := $.FrontierRows}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}
{{with .Run.Dropped}}
<h2>Not run here</h2>
<p>Optional groups of the scenario this host refused; the run went without them.</p>
<table><tr><th>group</th><th>technology</th><th>why</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{.What}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>
{{end}}
<h2>Normalised to the baseline</h2>
<p class="muted">Bars: each group's mean relative to the baseline's; whiskers: 95% confidence interval; dashed line: 1.00.
↑ higher is better, ↓ lower is better. Green/red: better/worse beyond the interval.</p>
{{range .Charts}}{{template "barchart" .}}{{end}}

<h2>Comparison table</h2>
<table>
<tr><th>workload</th><th>metric</th>{{range .Columns}}<th>{{.Label}}</th>{{end}}</tr>
{{template "rows" .Rows}}</table>
{{if .NonFinite}}<p><strong>Note:</strong> {{.NonFinite}}</p>{{end}}{{if .SharedCPUs}}<p><strong>Note:</strong> {{.SharedCPUs}}</p>{{end}}{{if .HostLoad}}<p><strong>Note:</strong> {{.HostLoad}}</p>{{end}}
<p><a download="vfleet-run-{{.Run.ID}}.csv" href="{{.CSVHref}}">Download every raw sample (CSV)</a> ·
<a download="vfleet-run-{{.Run.ID}}.json" href="{{.JSONHref}}">Download the run, its summaries and every sample (JSON)</a></p>

{{with .Interference}}<h2>Interference</h2>
<p class="muted">Each workload's headline metric measured with one guest at a time (the others idle) and with every guest
running it at the same moment, against the baseline alone = 1.00: (1) the baseline while the guests idle, (2) each guest
while the baseline idles, (3) all of them concurrently.</p>
<table>
<tr><th>workload</th><th>metric</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{template "rows" .Rows}}</table>
{{end}}

{{if .Scaling}}<h2>Scaling</h2>
<p class="muted">Where the run has entries of one workload that differ in a single numeric parameter: each group's mean
of the workload's headline metric at each setting, with its 95% confidence interval as error bars.</p>
{{range .Scaling}}
<h3>{{.Title}}</h3>
{{if .Fixed}}<p class="muted">{{.Fixed}}</p>{{end}}
{{template "linechart" .}}
{{end}}{{end}}

{{if .Cost}}<h2>CPU cost of the measuring tool</h2>
<p class="muted">The {{.CostNote}}, so a data path that moves work into the kernel or another process looks cheaper here
than it is. Per execution (repetitions × guests of the group): CPU time, wall time and their ratio in busy cores. Where the
workload's headline metric is a rate: CPU time per unit of work, the CPU time divided by the rate times the wall time
(start-up of the tool counts as time at that rate), and its ratio to the baseline's (lower is cheaper).</p>
<table>
<tr><th>workload</th><th>group</th><th>n</th><th>CPU / execution</th><th>wall / execution</th><th>cores</th><th>CPU per unit of work</th><th>vs baseline ↓</th></tr>
{{range .Cost}}<tr><td>{{.Workload}}</td><td>{{.Label}}</td><td class="num">{{.Executions}}</td><td class="num">{{.CPU}}</td><td class="num">{{.Wall}}</td><td class="num">{{.Cores}}</td>
<td class="num">{{.PerUnit}}{{if .PerUnitCI}}<br><span class="muted">{{.PerUnitCI}}</span>{{end}}</td><td class="num {{.Class}}">{{.Ratio}}{{if .RatioCI}}<br><span class="muted">{{.RatioCI}}</span>{{end}}</td></tr>
{{end}}</table>{{end}}

{{if .Latency}}<h2>Latency distributions</h2>
<p class="muted">Each row merges the latency histograms of every repetition and every guest of the group into one
distribution and reads its percentiles from it; percentiles are never averaged over executions. Percentiles are within
1.1% (the width of a histogram bucket); min, mean, max and stddev are exact.</p>
{{range .Latency}}{{if .Title}}<h3>{{.Title}}</h3>{{end}}<table>
<tr><th>workload</th><th>metric</th><th>group</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>min</th><th>mean</th><th>max</th><th>stddev</th><th>unit</th><th>n</th></tr>
{{range .Rows}}<tr><td>{{.Workload}}</td><td>{{.Metric}}</td><td>{{.Label}}</td>{{range .Figures}}<td class="num">{{.}}</td>{{end}}<td>{{.Unit}}</td><td class="num">{{.Count}}</td></tr>
{{end}}</table>
{{end}}
{{if .LatencyNote}}<p><strong>Note:</strong> {{.LatencyNote}}</p>{{end}}
<p class="muted">Cumulative distributions: the share of observations at or below a latency, on a logarithmic axis;
dotted lines mark p90 and p99. A curve further left is faster; a curve that reaches the top later has a longer tail.</p>
{{range $c := .CDFs}}
<h3>{{.Title}}</h3>
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}: cumulative distribution of latency">
{{range .XMinor}}<line class="minor" x1="{{px .}}" x2="{{px .}}" y1="{{px $c.Top}}" y2="{{px $c.Bottom}}"/>
{{end}}{{range .XTicks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="{{px $c.Top}}" y2="{{px $c.Bottom}}"/><text x="{{px .X}}" y="{{px $c.Bottom}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .YTicks}}{{if .Ref}}<line class="pref" x1="{{px $c.Left}}" x2="{{px $c.Right}}" y1="{{px .Y}}" y2="{{px .Y}}"/><text x="{{px $c.Right}}" dx="4" y="{{px .Y}}" dominant-baseline="middle" class="muted">{{.Label}}</text>
{{else}}<line class="grid" x1="{{px $c.Left}}" x2="{{px $c.Right}}" y1="{{px .Y}}" y2="{{px .Y}}"/><text x="{{px $c.Left}}" dx="-6" y="{{px .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}{{end}}<text x="{{px $c.Left}}" y="{{px $c.Bottom}}" dy="34">{{.AxisLabel}}</text>
{{range .Lines}}<polyline class="cdf" stroke="{{.Color}}" points="{{.Points}}"><title>{{.Label}}: {{.Summary}}</title></polyline>
{{end}}{{range .Lines}}<line class="cdf" stroke="{{.Color}}" x1="{{px .SwatchX1}}" x2="{{px .SwatchX2}}" y1="{{px .LegendY}}" y2="{{px .LegendY}}"/><text x="{{px .TextX}}" y="{{px .LegendY}}" dominant-baseline="middle"><tspan font-weight="600">{{.Label}}</tspan>  {{.Summary}}</text>
{{end}}</svg>
{{end}}{{end}}

{{if .NotSupported}}<h2>Not supported</h2>
<p>Steps a guest group could not run: its kernel or its isolation lacks what the workload needs. Each is recorded once; the group's other steps of the workload were not run.</p>
<table><tr><th>group</th><th>workload</th><th>why</th></tr>
{{range .NotSupported}}<tr><td>{{.Group}}</td><td>{{failureStep .}}</td><td>{{.Error}}</td></tr>
{{end}}</table>{{end}}

{{if .Failures}}<h2>Failures</h2>
<table><tr><th>guest</th><th>workload</th><th>repetition</th><th>error</th></tr>
{{range .Failures}}<tr><td>{{.Guest}}</td><td>{{failureStep .}}</td><td>{{failureRep .}}</td><td>{{.Error}}{{if .Stderr}}<pre>{{stderrTail .Stderr}}</pre>{{end}}</td></tr>
{{end}}</table>{{end}}

<h2>Scenario</h2>
<pre>{{.Scenario}}</pre>
</body>
</html>
`

// tableHTML draws a ratio chart (a chart of bars of ratios with their
// intervals) and the rows of a table of cells; the run's page and the page
// across machines parse it beside their own.
const tableHTML = `{{define "barchart"}}
<h3>{{.Title}}</h3>
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}} normalised to the baseline">
{{range .Ticks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="14" y2="{{$.Height}}"/><text x="{{px .X}}" y="12" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="0" y="{{px .MidY}}" dominant-baseline="middle">{{.Label}}</text>
<rect class="{{.Class}}" x="{{px .X0}}" y="{{.Y}}" width="{{px .W}}" height="{{.H}}"><title>{{.Label}}: {{.Value}}</title></rect>
{{if .Whisker}}<line class="ci" x1="{{px .LoX}}" x2="{{px .HiX}}" y1="{{px .MidY}}" y2="{{px .MidY}}"/>{{end}}
<text x="{{px .HiX}}" dx="6" y="{{px .MidY}}" dominant-baseline="middle">{{.Value}}</text>
{{end}}<line class="ref" x1="{{px .OneX}}" x2="{{px .OneX}}" y1="14" y2="{{.Height}}"/>
</svg>
{{end}}{{define "rows"}}{{range .}}<tr><td>{{.Workload}}</td><td>{{.Metric}} {{.Arrow}}</td>{{range .Cells}}<td class="num {{.Class}}">{{.Ratio}}{{if .Raw}}<br><span class="muted">{{.Raw}}</span>{{end}}{{if .CI}}<br><span class="muted">{{.CI}}</span>{{end}}</td>{{end}}</tr>
{{end}}{{end}}`

// pageCSS is shared by the run report and the A/B comparison page, so
// both read alike.
const pageCSS = `body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #1d2328; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #d8dde2; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: .3rem; font-weight: 600; }
.status.complete { background: #e3f3e6; color: #1f6b30; } .status.incomplete, .status.failed, .status.running { background: #fde8e4; color: #9b2c1a; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { padding: .25rem .6rem; text-align: left; border-bottom: 1px solid #eceff2; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.better { color: #1f6b30; } .worse { color: #9b2c1a; } .muted { color: #66717c; }
svg { display: block; margin: .5rem 0 1.5rem; } svg text { font: 12px system-ui, sans-serif; fill: #1d2328; }
rect.better { fill: #5aa86a; } rect.worse { fill: #d0664f; } rect.same { fill: #8fa3b5; } rect.baseline { fill: #c2c9d0; }
rect.band { fill: #f1ece0; }
polyline.series { fill: none; stroke-width: 2; stroke-linejoin: round; } line.series { stroke-width: 3; }
path.errbar { fill: none; stroke-width: 1.5; } line.axis { stroke: #9aa5b0; }
polyline.cdf { fill: none; stroke-width: 2; stroke-linejoin: round; } line.cdf { stroke-width: 3; }
line.pref { stroke: #9aa5b0; stroke-dasharray: 2 3; } line.minor { stroke: #f3f5f7; } svg text.muted { fill: #66717c; }
line.ref { stroke: #1d2328; stroke-dasharray: 4 3; } line.ci { stroke: #1d2328; stroke-width: 1.5; } line.grid { stroke: #eceff2; }
polyline.frontier { fill: none; stroke: #6a3d9a; stroke-width: 3; stroke-linejoin: round; }
circle.frontier { fill: #6a3d9a; } circle.dominated { fill: #f0b429; stroke: #8a6d1f; } path.frontier-bar { stroke: #66717c; }
pre { background: #f5f7f9; padding: .8rem; overflow-x: auto; }
`

// abPageHTML is the A/B comparison page.
const abPageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vfleet compare run {{.A.Run.ID}} → run {{.B.Run.ID}}</title>
<style>
` + pageCSS + `</style>
</head>
<body>
<h1>vfleet compare: run {{.A.Run.ID}} → run {{.B.Run.ID}}</h1>
<p>{{range .Counts}}<span class="{{.Class}}"><strong>{{.N}}</strong> {{.Verdict}}</span> · {{end}}{{.Criteria}}.</p>
{{range .Notes}}<p><strong>Note:</strong> {{.}}</p>{{end}}

<h2>Runs</h2>
<table>
<tr><th></th><th>run</th><th>scenario</th><th>status</th><th>started</th><th>host</th></tr>
{{range $side, $r := (arr .A .B)}}<tr><th>{{if eq $side 0}}A{{else}}B{{end}}</th><td>{{$r.Run.ID}}</td><td>{{$r.Run.ScenarioName}} <span class="muted">(sha256 {{printf "%.12s" $r.Run.ScenarioHash}})</span></td>
<td><span class="status {{$r.Run.Status}}">{{$r.Run.Status}}</span></td><td>{{fmtTime $r.Run.Started}}</td><td>{{$r.Host}}</td></tr>
{{end}}</table>
{{if .HostsDiff}}<p class="worse"><strong>The runs were not measured on the same machine setup</strong>, which alone can explain a change:</p>
<ul>{{range .HostsDiff}}<li>{{.}}</li>{{end}}</ul>{{end}}

<h2>Changes</h2>
<p class="muted">Bars: the change of B's mean from A's; whiskers: its 95% confidence interval; shaded: the ±{{.NoisePct}} noise floor.
↑ higher is better, ↓ lower is better. Green/red: better/worse (significant, and the interval not within the floor); grey: the same
(the interval within the floor), or undecided (neither yet: the note above says what would decide it).</p>
{{if .HasChart}}{{with .Chart}}{{$c := .}}
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="change of every metric from run A to run B">
<rect class="band" x="{{px .BandX}}" y="14" width="{{px .BandW}}" height="{{.Height}}"/>
{{range .Ticks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="14" y2="{{$c.Height}}"/><text x="{{px .X}}" y="12" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="0" y="{{px .MidY}}" dominant-baseline="middle">{{.Label}}</text>
<rect class="{{.Class}}" x="{{px .X0}}" y="{{.Y}}" width="{{px .W}}" height="{{.H}}"><title>{{.Label}}: {{.Value}}</title></rect>
{{if .Whisker}}<line class="ci" x1="{{px .LoX}}" x2="{{px .HiX}}" y1="{{px .MidY}}" y2="{{px .MidY}}"/>{{end}}
<text x="{{px .TextX}}" y="{{px .MidY}}" text-anchor="{{.Anchor}}" dominant-baseline="middle">{{.Value}}</text>
{{end}}<line class="ref" x1="{{px .ZeroX}}" x2="{{px .ZeroX}}" y1="14" y2="{{.Height}}"/>
</svg>
{{end}}{{else}}<p>No metric was measured in both runs.</p>{{end}}

<h2>Table</h2>
<table>
<tr><th>group</th><th>workload</th><th>metric</th><th>A</th><th>B</th><th>change [95% CI]</th><th>cv A/B</th><th>p</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{.Group}}</td><td>{{.Workload}}{{if .Params}}<br><span class="muted">{{.Params}}</span>{{end}}</td><td>{{.Metric}} {{.Arrow}}</td>
<td class="num">{{.A}}</td><td class="num">{{.B}}</td><td class="num {{.Class}}">{{.Change}}</td><td class="num">{{.CV}}</td><td class="num">{{.P}}</td><td class="{{.Class}}">{{.Verdict}}</td></tr>
{{end}}</table>
<p class="muted">cv: each side's coefficient of variation (standard deviation / mean). p: t test (Welch's standard error, min(n<sub>A</sub>, n<sub>B</sub>) − 1 degrees of freedom) on the difference of the
means at the look (repetitions so far) that decided the row, against that look's share of alpha; the verdict says at how many
repetitions it was decided when it was earlier than the last. The interval of the change propagates both means' 95% intervals.</p>
</body>
</html>
`

// lineChartHTML draws a lineChart (or a type that embeds one) as SVG; the
// pages that plot series against a number parse it beside their own.
const lineChartHTML = `{{define "linechart"}}<svg class="scaling" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}">
{{range .XTicks}}<line class="grid" x1="{{px .X}}" x2="{{px .X}}" y1="{{px $.Top}}" y2="{{px $.Bottom}}"/>{{if .Label}}<text x="{{px .X}}" y="{{px $.Bottom}}" dy="16" text-anchor="middle">{{.Label}}</text>{{end}}
{{end}}{{range .YTicks}}<line class="grid" x1="{{px $.Left}}" x2="{{px $.Right}}" y1="{{px .Y}}" y2="{{px .Y}}"/><text x="{{px $.Left}}" dx="-6" y="{{px .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{px .Left}}" x2="{{px .Right}}" y1="{{px .Bottom}}" y2="{{px .Bottom}}"/>
<text x="{{px .Left}}" y="{{px .Top}}" dy="-12">{{.YLabel}}</text><text x="{{px .Left}}" y="{{px .Bottom}}" dy="36">{{.XLabel}}</text>
{{range .Rules}}<line class="change" stroke="{{.Color}}" stroke-width="2" stroke-dasharray="6 4" x1="{{px .X}}" x2="{{px .X}}" y1="{{px $.Top}}" y2="{{px $.Bottom}}"><title>{{.Title}}</title></line>
{{end}}{{range .Lines}}{{$l := .}}{{if .Points}}<polyline class="series" stroke="{{.Color}}" points="{{.Points}}"/>
{{end}}{{range .Marks}}{{if .Bar}}<path class="errbar" stroke="{{$l.Color}}" d="M{{px .X}} {{px .LoY}}V{{px .HiY}}M{{px .X}} {{px .LoY}}m-4 0h8M{{px .X}} {{px .HiY}}m-4 0h8"/>
{{end}}<circle cx="{{px .X}}" cy="{{px .Y}}" r="4" fill="{{$l.Color}}"><title>{{.Title}}</title></circle>
{{end}}{{end}}{{range .Lines}}<line class="series" stroke="{{.Color}}" x1="{{px .SwatchX1}}" x2="{{px .SwatchX2}}" y1="{{px .LegendY}}" y2="{{px .LegendY}}"/><text x="{{px .TextX}}" y="{{px .LegendY}}" dominant-baseline="middle">{{.Label}}</text>
{{end}}</svg>{{end}}`
