package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
)

// changeChart is the A/B page's plot: one bar per compared metric from 0 to
// its relative change in percent, with the change's interval as a whisker
// and the noise floor as a shaded band around 0.
type changeChart struct {
	Width, Height int
	ZeroX         float64
	BandX, BandW  float64 // the ±noise floor band
	Bars          []bar
	Ticks         []tick
}

const abBarHeight = 14

func sortedABRows(c ABComparison) []ABRow {
	rows := append([]ABRow(nil), c.Rows...)
	sort.SliceStable(rows, func(i, j int) bool { return verdictRank[rows[i].Verdict] < verdictRank[rows[j].Verdict] })
	return rows
}

// comparable reports whether a row has a change to show: both runs have
// it and A's mean was not 0.
func (r ABRow) comparable() bool {
	return r.Verdict != VerdictOnlyA && r.Verdict != VerdictOnlyB &&
		finite(r.Change.Ratio) && finite(r.Change.CILow) && finite(r.Change.CIHigh)
}

func abLabel(r ABRow) string {
	label := fmt.Sprintf("%s · %s %s %s", r.Group, r.WorkloadID, r.Metric, arrow(string(r.Better)))
	if r.Params != "" {
		label += " (" + r.Params + ")"
	}
	return label
}

func verdictClass(v string) string {
	switch v {
	case VerdictBetter:
		return "better"
	case VerdictWorse:
		return "worse"
	}
	return "same"
}

func buildChangeChart(c ABComparison, rows []ABRow) (changeChart, bool) {
	// Row labels name group, workload, metric and parameters, so they are
	// long; the label column grows to fit them (about 7 px a character).
	labelW := float64(labelWidth)
	for _, r := range rows {
		labelW = math.Max(labelW, 7*float64(utf8.RuneCountInString(abLabel(r)))+12)
	}
	ch := changeChart{Width: int(labelW) + plotWidth + 70}
	extent := c.Options.NoiseFloor * 100
	for _, r := range rows {
		if r.comparable() {
			extent = math.Max(extent, math.Max(math.Abs(r.Change.CILow-1), math.Abs(r.Change.CIHigh-1))*100)
		}
	}
	end, step := symmetricAxis(extent)
	// Half the plot each side of 0, so that better and worse are equally far.
	scale := plotWidth / (2 * end)
	x := func(pct float64) float64 { return labelW + (pct+end)*scale }
	ch.ZeroX = x(0)
	ch.BandX, ch.BandW = x(-c.Options.NoiseFloor*100), 2*c.Options.NoiseFloor*100*scale
	for _, r := range rows {
		if !r.comparable() {
			continue
		}
		y := chartMargin + len(ch.Bars)*(abBarHeight+barGap)
		pct, lo, hi := (r.Change.Ratio-1)*100, (r.Change.CILow-1)*100, (r.Change.CIHigh-1)*100
		b := bar{
			Y: y, H: abBarHeight, X0: math.Min(x(0), x(pct)), W: math.Abs(x(pct) - x(0)),
			LoX: x(lo), HiX: x(hi), MidY: float64(y) + abBarHeight/2.0,
			Label: abLabel(r), Value: signedPercent(pct) + "%", Class: verdictClass(r.Verdict), Whisker: hi > lo,
		}
		// The value goes on the other side of 0 from its bar, where it
		// cannot run into the bar, its whisker or the row labels.
		if pct < 0 {
			b.TextX, b.Anchor = math.Max(ch.ZeroX, b.HiX)+6, "start"
		} else {
			b.TextX, b.Anchor = math.Min(ch.ZeroX, b.LoX)-6, "end"
		}
		ch.Bars = append(ch.Bars, b)
	}
	if len(ch.Bars) == 0 {
		return ch, false
	}
	ch.Height = chartMargin*2 + len(ch.Bars)*(abBarHeight+barGap)
	n := int(math.Round(end / step))
	for k := -n; k <= n; k++ {
		t := float64(k) * step
		label := "0%"
		if k != 0 {
			label = fmt.Sprintf("%+g%%", t)
		}
		ch.Ticks = append(ch.Ticks, tick{X: x(t), Label: label})
	}
	return ch, true
}

// signedPercent prints a percentage with one decimal and its sign, except
// for a value that rounds to zero, which has none: "-0.0" would suggest a
// direction the data do not have.
func signedPercent(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	switch {
	case s == "0.0" || s == "-0.0":
		return "0.0"
	case v > 0:
		return "+" + s
	}
	return s
}

// symmetricAxis picks the half-width of a ±percent axis and its tick step
// (1, 2, 2.5 or 5 times a power of ten) so that the data fit in at most
// four steps a side, with a little room for the value labels.
func symmetricAxis(maxAbs float64) (end, step float64) {
	need := math.Max(maxAbs*1.1, 1)
	mag := math.Pow(10, math.Floor(math.Log10(need/4)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		step = m * mag
		if need/step <= 4 {
			break
		}
	}
	return math.Ceil(need/step-1e-9) * step, step
}

type abHTMLData struct {
	A, B      abRunInfo
	Options   CompareOptions
	NoisePct  string
	Criteria  string
	HostsDiff []string
	Chart     changeChart
	HasChart  bool
	Rows      []abHTMLRow
	Counts    []abCount
	Notes     []string
}

type abRunInfo struct {
	Run  store.Run
	Host string
}

type abHTMLRow struct {
	Group, Workload, Params, Metric, Arrow string
	A, B, Change, CV, P, Verdict, Class    string
}

type abCount struct {
	Verdict, Class string
	N              int
}

// WriteABHTML writes the comparison of two runs as a self-contained page in
// the style of the run report: which runs, whether they were measured on
// the same host, a plot of every change with its interval against the
// noise floor, and the table behind it.
func WriteABHTML(w io.Writer, c ABComparison) error {
	rows := sortedABRows(c)
	d := abHTMLData{
		A: abRunInfo{Run: c.A, Host: hostLine(c.A.Host)}, B: abRunInfo{Run: c.B, Host: hostLine(c.B.Host)},
		Options: c.Options, NoisePct: fmt.Sprintf("%g%%", 100*c.Options.NoiseFloor), Criteria: criteria(c.Options), HostsDiff: runDifferences(c.A, c.B),
	}
	d.Chart, d.HasChart = buildChangeChart(c, rows)
	counts := map[string]int{}
	for _, r := range rows {
		hr := abHTMLRow{Group: r.Group, Workload: r.WorkloadID, Params: r.Params, Metric: r.Metric, Arrow: arrow(string(r.Better)),
			A: cellValue(r.A, r.Unit), B: cellValue(r.B, r.Unit), Change: "—", CV: "—", P: "—", Verdict: verdictText(r), Class: verdictClass(r.Verdict)}
		if r.Verdict != VerdictOnlyA && r.Verdict != VerdictOnlyB {
			hr.P = fmt.Sprintf("%.3g", r.P)
			hr.Change = changeText(r)
			hr.CV = cvText(r)
		}
		if r.Verdict == VerdictOnlyA || r.Verdict == VerdictOnlyB {
			hr.Class = "muted"
		}
		counts[r.Verdict]++
		d.Rows = append(d.Rows, hr)
	}
	for _, v := range []string{VerdictWorse, VerdictUndecided, VerdictBetter, VerdictSame, VerdictOnlyA, VerdictOnlyB} {
		if counts[v] > 0 {
			d.Counts = append(d.Counts, abCount{Verdict: v, Class: verdictClass(v), N: counts[v]})
		}
	}
	d.Notes = append(undecidedNotes(c), abLoadNotes(c)...)
	return abPageTemplate.Execute(w, d)
}

func hostLine(h hostinfo.Fingerprint) string {
	var parts []string
	for _, p := range []string{h.Hostname, h.CPUModel, h.Kernel} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "unknown host"
	}
	return strings.Join(parts, " · ")
}

// runDifferences names what differs between the machines of two runs:
// the hosts, and the network peers, a remote one as its own machine.
func runDifferences(a, b store.Run) []string {
	out := hostDifferences(a.Host, b.Host)
	au, ap, aok := a.RemotePeer()
	bu, bp, bok := b.RemotePeer()
	local := func(url string, ok bool) string {
		if !ok {
			return "this host's namespace"
		}
		return url
	}
	if au != bu {
		out = append(out, fmt.Sprintf("network peer: %s → %s", local(au, aok), local(bu, bok)))
	}
	if aok && bok {
		for _, d := range hostDifferences(ap, bp) {
			out = append(out, "peer "+d)
		}
	}
	return out
}

// hostDifferences names what differs between the two runs' machines that
// could by itself explain a change.
func hostDifferences(a, b hostinfo.Fingerprint) []string {
	var out []string
	for _, f := range []struct{ name, a, b string }{
		{"host", a.Hostname, b.Hostname}, {"kernel", a.Kernel, b.Kernel}, {"CPU", a.CPUModel, b.CPUModel},
		{"microcode", a.Microcode, b.Microcode}, {"SMT", a.SMT, b.SMT}, {"governor", a.Governor, b.Governor},
		{"cgroups", a.CgroupMode, b.CgroupMode}, {"virtualised", a.Virtualized, b.Virtualized},
		{"preemption", a.RealTime.Preemption, b.RealTime.Preemption}, {"NIC", nicLine(a.NIC), nicLine(b.NIC)},
		{"RT throttling", rtThrottling(a.RealTime), rtThrottling(b.RealTime)},
		{"isolated CPUs", cpusOrNone(a.RealTime, a.RealTime.IsolatedCPUs), cpusOrNone(b.RealTime, b.RealTime.IsolatedCPUs)},
		{"nohz_full", cpusOrNone(a.RealTime, a.RealTime.NohzFull), cpusOrNone(b.RealTime, b.RealTime.NohzFull)},
		{"vfleet", a.VfleetVer, b.VfleetVer},
	} {
		if f.a != f.b {
			out = append(out, fmt.Sprintf("%s: %s → %s", f.name, orUnknown(f.a), orUnknown(f.b)))
		}
	}
	if a.OnlineCPUs != b.OnlineCPUs {
		out = append(out, fmt.Sprintf("online CPUs: %d → %d", a.OnlineCPUs, b.OnlineCPUs))
	}
	for _, k := range sortedStrings(mergeKeys(a.ToolVersions, b.ToolVersions)) {
		if a.ToolVersions[k] != b.ToolVersions[k] {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, orUnknown(a.ToolVersions[k]), orUnknown(b.ToolVersions[k])))
		}
	}
	return out
}

// cpusOrNone reads a CPU list of rt: empty means no CPU where the run
// recorded its real-time settings, and unknown only where it predates them.
func cpusOrNone(rt hostinfo.RealTime, list string) string {
	if list == "" && !reflect.ValueOf(rt).IsZero() {
		return "none"
	}
	return list
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

var abPageTemplate = template.Must(template.New("ab").Funcs(templateFuncs).Parse(abPageHTML))
