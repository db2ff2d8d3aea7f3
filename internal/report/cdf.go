package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// cdfChart is one latency metric's distribution plot: the cumulative
// distribution of every row of the metric (a guest group, per data path),
// over a logarithmic time axis, so that the body of the distribution and
// its tail, often a hundred times further out, are both readable.
type cdfChart struct {
	Title         string
	Width, Height int
	// The plot area.
	Left, Top, Right, Bottom float64
	XTicks                   []tick
	XMinor                   []float64
	YTicks                   []yTick
	Lines                    []cdfLine
	AxisLabel                string
}

type yTick struct {
	Y     float64
	Label string
	Ref   bool // a percentile reference (p50, p90, p99) rather than a plain grid line
}

type cdfLine struct {
	Points  string // SVG polyline points
	Color   string
	Label   string
	Summary string // the row's key percentiles, for the legend
	// Its legend entry: a swatch of the line, then the label.
	LegendY, SwatchX1, SwatchX2, TextX float64
}

// cdfPalette is distinguishable for the common forms of colour blindness
// (Okabe and Ito), without its yellow, which is unreadable on white.
var cdfPalette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

const (
	cdfPlotLeft   = 60
	cdfPlotTop    = 24
	cdfPlotWidth  = 600
	cdfPlotHeight = 240
	cdfLegendLine = 18
)

// toMicros converts a latency unit to microseconds; ok is false for a unit
// that is not a time, which is then plotted as it is.
func toMicros(unit string) (factor float64, ok bool) {
	switch unit {
	case "ns":
		return 1e-3, true
	case "us", "µs":
		return 1, true
	case "ms":
		return 1e3, true
	case "s":
		return 1e6, true
	}
	return 1, false
}

// buildCDFCharts draws one chart per latency metric, rows in order.
func buildCDFCharts(rows []LatencyRow) []cdfChart {
	var charts []cdfChart
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].WorkloadID == rows[start].WorkloadID && rows[end].Metric == rows[start].Metric {
			end++
		}
		if ch, ok := buildCDFChart(rows[start:end]); ok {
			charts = append(charts, ch)
		}
		start = end
	}
	return charts
}

func buildCDFChart(rows []LatencyRow) (cdfChart, bool) {
	factor, isTime := toMicros(rows[0].Unit)
	unit := "µs"
	if !isTime {
		unit = rows[0].Unit
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if r.Hist.Count() == 0 {
			continue
		}
		f, _ := toMicros(r.Unit)
		if !isTime {
			f = 1
		}
		for _, p := range r.Hist.CDF() {
			if v := p.Value * f; v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if v := r.Hist.Min() * f; v > 0 {
			lo = math.Min(lo, v)
		}
	}
	if math.IsInf(lo, 1) {
		return cdfChart{}, false // nothing positive to put on a log axis
	}
	// The axis runs between round numbers (1, 2 or 5 times a power of ten)
	// around the data, so no decade is drawn empty.
	left, right := roundBelow(lo), roundAbove(hi)
	if right <= left {
		right = roundAbove(left * 1.01)
	}
	l0, l1 := math.Log10(left), math.Log10(right)
	ch := cdfChart{
		Title: rows[0].WorkloadID + " · " + rows[0].Metric, AxisLabel: "latency (" + unit + ", log scale)",
		Left: cdfPlotLeft, Top: cdfPlotTop, Right: cdfPlotLeft + cdfPlotWidth, Bottom: cdfPlotTop + cdfPlotHeight,
	}
	x := func(v float64) float64 {
		if v <= left {
			return ch.Left
		}
		return ch.Left + (math.Log10(v)-l0)/(l1-l0)*cdfPlotWidth
	}
	y := func(frac float64) float64 { return ch.Bottom - frac*cdfPlotHeight }
	// Labels at 1, 2 and 5 of every decade while they fit, at the decades
	// alone over a wide range; light lines at every integer multiple.
	labelled := []float64{1, 2, 5}
	if l1-l0 > 3 {
		labelled = []float64{1}
	}
	for d := math.Floor(l0); d <= math.Ceil(l1); d++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, d)
			if v < left*(1-1e-9) || v > right*(1+1e-9) {
				continue
			}
			if containsFloat(labelled, m) {
				ch.XTicks = append(ch.XTicks, tick{X: x(v), Label: timeLabel(v, unit, isTime)})
			} else {
				ch.XMinor = append(ch.XMinor, x(v))
			}
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		ch.YTicks = append(ch.YTicks, yTick{Y: y(f), Label: strconv.FormatFloat(f, 'f', 2, 64)})
	}
	for _, p := range []struct {
		f     float64
		label string
	}{{0.9, "p90"}, {0.99, "p99"}} {
		ch.YTicks = append(ch.YTicks, yTick{Y: y(p.f), Label: p.label, Ref: true})
	}
	for i, r := range rows {
		if r.Hist.Count() == 0 {
			continue
		}
		f := factor
		if isTime {
			f, _ = toMicros(r.Unit)
		}
		var pts strings.Builder
		// The curve starts at the smallest observation, at 0.
		fmt.Fprintf(&pts, "%.1f,%.1f", x(r.Hist.Min()*f), y(0))
		for _, p := range r.Hist.CDF() {
			fmt.Fprintf(&pts, " %.1f,%.1f", x(p.Value*f), y(p.Fraction))
		}
		ch.Lines = append(ch.Lines, cdfLine{
			Points: pts.String(), Color: cdfPalette[i%len(cdfPalette)], Label: r.Label(),
			Summary: fmt.Sprintf("p50 %s · p99 %s · p99.9 %s %s (n=%d)", formatValue(r.Hist.Quantile(0.5)),
				formatValue(r.Hist.Quantile(0.99)), formatValue(r.Hist.Quantile(0.999)), r.Unit, r.Hist.Count()),
		})
	}
	legendTop := ch.Bottom + 44
	for i := range ch.Lines {
		l := &ch.Lines[i]
		l.LegendY, l.SwatchX1, l.SwatchX2, l.TextX = legendTop+float64(i)*cdfLegendLine, ch.Left, ch.Left+24, ch.Left+32
	}
	ch.Width = cdfPlotLeft + cdfPlotWidth + 40
	ch.Height = int(legendTop) + len(ch.Lines)*cdfLegendLine
	return ch, true
}

// roundBelow and roundAbove return the nearest of 1, 2 or 5 times a power
// of ten at or beyond v > 0.
func roundBelow(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*p <= v*(1+1e-9) {
			return m * p
		}
	}
	return p
}

func roundAbove(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func containsFloat(list []float64, v float64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// timeLabel names a round number of microseconds as people say it (200 µs,
// 1 ms, 50 s); other units get the plain number.
func timeLabel(v float64, unit string, isTime bool) string {
	if !isTime {
		return strconv.FormatFloat(v, 'g', -1, 64) + " " + unit
	}
	for _, u := range []struct {
		name  string
		micro float64
	}{{"s", 1e6}, {"ms", 1e3}, {"µs", 1}, {"ns", 1e-3}} {
		if v >= u.micro || u.name == "ns" {
			return strconv.FormatFloat(v/u.micro, 'g', 6, 64) + " " + u.name
		}
	}
	return ""
}
