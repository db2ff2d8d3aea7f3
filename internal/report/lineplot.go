package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// linePlot is what a line plot shows: series of means with their
// intervals over a numeric x. It knows nothing of workloads, so any sweep
// (a parameter, the size of a fleet) can be drawn with it.
type linePlot struct {
	Title  string
	XLabel string // the x quantity, e.g. "streams"
	YLabel string // the y quantity, e.g. "net.throughput_bps"
	YUnit  string // the unit of y, which picks how its ticks read
	LogX   bool
	// XName, when set, is how an x value reads on its tick and in its
	// points' titles: x may be a position whose name is not a number of
	// the same order (a run id).
	XName  func(x float64) string
	Series []Series
	// Rules are vertical lines across the plot at x values (a series'
	// change points), each in its series' colour.
	Rules []Rule
}

// Rule is a vertical line at X drawn in the colour of series Series.
type Rule struct {
	X      float64
	Series int
	Title  string
}

// lineChart is a linePlot laid out as SVG.
type lineChart struct {
	Title         string
	Width, Height int
	// The plot area.
	Left, Top, Right, Bottom float64
	XTicks                   []tick
	YTicks                   []yTick
	XLabel, YLabel           string
	Lines                    []plotLine
	Rules                    []plotRule
}

// plotRule is a Rule laid out.
type plotRule struct {
	X            float64
	Color, Title string
}

type plotLine struct {
	Color, Label string
	Points       string // SVG polyline points, empty for a single point
	Marks        []plotMark
	// Its legend entry: a swatch of the line, then the label.
	LegendY, SwatchX1, SwatchX2, TextX float64
}

// plotMark is one point: a dot at the mean and, when the interval has a
// width, an error bar with caps from LoY to HiY.
type plotMark struct {
	X, Y, LoY, HiY float64
	Bar            bool
	Title          string
}

const (
	linePlotLeft   = 90
	linePlotTop    = 28
	linePlotWidth  = 560
	linePlotHeight = 240
	lineLegendLine = 18
	// minTickGap keeps x labels of close values (1, 2 on a wide log axis)
	// from overprinting: a closer one keeps its grid line, not its label.
	minTickGap = 36
	// seriesDodge shifts the series apart sideways by this many pixels, so
	// that error bars of groups measured at the same x do not hide each
	// other.
	seriesDodge = 5
)

// buildLinePlot lays out p; ok is false when no series has a point.
func buildLinePlot(p linePlot) (lineChart, bool) {
	var xs []float64
	yLo, yHi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if !finite(pt.X) || !finite(pt.Y) || p.LogX && pt.X <= 0 {
				continue
			}
			xs = append(xs, pt.X)
			for _, v := range []float64{pt.Y, pt.Low, pt.High} {
				if finite(v) {
					yLo, yHi = math.Min(yLo, v), math.Max(yHi, v)
				}
			}
		}
	}
	if len(xs) == 0 {
		return lineChart{}, false
	}
	ch := lineChart{Title: p.Title, Left: linePlotLeft, Top: linePlotTop, Right: linePlotLeft + linePlotWidth,
		Bottom: linePlotTop + linePlotHeight, XLabel: p.XLabel}
	if p.LogX {
		ch.XLabel += " (log scale)"
	}

	// x: the measured values are the ticks, since they are the settings
	// the run chose; a margin keeps the end points off the frame.
	xMin, xMax := minMax(xs)
	pos := func(v float64) float64 { return v }
	if p.LogX {
		pos = math.Log10
	}
	a, b := pos(xMin), pos(xMax)
	if a == b {
		a, b = a-1, b+1
	}
	pad := (b - a) * 0.06
	a, b = a-pad, b+pad
	x := func(v float64) float64 { return ch.Left + (pos(v)-a)/(b-a)*linePlotWidth }
	xName := p.XName
	if xName == nil {
		xName = func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	}
	lastLabel := math.Inf(-1)
	for _, v := range distinctSorted(xs) {
		t := tick{X: x(v)}
		if t.X-lastLabel >= minTickGap {
			t.Label, lastLabel = xName(v), t.X
		}
		ch.XTicks = append(ch.XTicks, t)
	}

	// y: from 0 when every value is positive, so that a 3% step does not
	// look like a cliff; round steps of 1, 2 or 5 times a power of ten.
	if yLo > 0 {
		yLo = 0
	}
	if yHi < 0 {
		yHi = 0
	}
	if yHi == yLo {
		yHi = yLo + 1
	}
	scale, unit := axisUnit(p.YUnit, math.Max(math.Abs(yLo), math.Abs(yHi)))
	step := niceStep((yHi - yLo) / scale / 5)
	lo, hi := math.Floor(yLo/scale/step)*step, math.Ceil(yHi/scale/step)*step
	y := func(v float64) float64 { return ch.Bottom - (v/scale-lo)/(hi-lo)*linePlotHeight }
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	for k := 0; lo+float64(k)*step <= hi+step*1e-9; k++ {
		v := lo + float64(k)*step
		ch.YTicks = append(ch.YTicks, yTick{Y: ch.Bottom - float64(k)*step/(hi-lo)*linePlotHeight,
			Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	ch.YLabel = p.YLabel
	if unit != "" {
		ch.YLabel += " (" + unit + ")"
	}

	for i, s := range p.Series {
		l := plotLine{Color: cdfPalette[i%len(cdfPalette)], Label: s.Label}
		dodge := (float64(i) - float64(len(p.Series)-1)/2) * seriesDodge
		var pts []string
		for _, pt := range s.Points {
			if !finite(pt.X) || !finite(pt.Y) || p.LogX && pt.X <= 0 {
				continue
			}
			m := plotMark{X: x(pt.X) + dodge, Y: y(pt.Y), LoY: y(pt.Y), HiY: y(pt.Y)}
			if finite(pt.Low) && finite(pt.High) && pt.High > pt.Low {
				m.LoY, m.HiY, m.Bar = y(pt.Low), y(pt.High), true
			}
			m.Title = fmt.Sprintf("%s · %s %s: %s", s.Label, p.XLabel, xName(pt.X), formatQuantity(pt.Y, p.YUnit))
			if m.Bar {
				m.Title += fmt.Sprintf(" [%s, %s]", formatQuantity(pt.Low, p.YUnit), formatQuantity(pt.High, p.YUnit))
			}
			if pt.N > 0 {
				m.Title += fmt.Sprintf(" (n=%d)", pt.N)
			}
			if pt.Source != "" {
				m.Title += " · " + pt.Source
			}
			l.Marks = append(l.Marks, m)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", m.X, m.Y))
		}
		if len(l.Marks) == 0 {
			continue
		}
		if len(pts) > 1 {
			l.Points = strings.Join(pts, " ")
		}
		ch.Lines = append(ch.Lines, l)
	}
	for _, r := range p.Rules {
		if finite(r.X) && !(p.LogX && r.X <= 0) {
			ch.Rules = append(ch.Rules, plotRule{X: x(r.X), Color: cdfPalette[r.Series%len(cdfPalette)], Title: r.Title})
		}
	}
	legendTop := ch.Bottom + 52
	for i := range ch.Lines {
		l := &ch.Lines[i]
		l.LegendY, l.SwatchX1, l.SwatchX2, l.TextX = legendTop+float64(i)*lineLegendLine, ch.Left, ch.Left+24, ch.Left+32
	}
	ch.Width = int(ch.Right) + 40
	ch.Height = int(legendTop) + len(ch.Lines)*lineLegendLine
	return ch, true
}

// axisUnit scales an axis of bit rates to the SI prefix of its largest
// value (Gbit/s); other units are shown as they are.
func axisUnit(unit string, maxAbs float64) (scale float64, label string) {
	if rest, ok := strings.CutPrefix(unit, "bit/s"); ok {
		for _, p := range []struct {
			prefix string
			scale  float64
		}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
			if maxAbs >= p.scale {
				return p.scale, p.prefix + "bit/s" + rest
			}
		}
	}
	return 1, unit
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || !finite(raw) {
		return 1
	}
	return roundAbove(raw)
}

func minMax(vs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

func distinctSorted(vs []float64) []float64 {
	sorted := append([]float64(nil), vs...)
	sort.Float64s(sorted)
	var out []float64
	for _, v := range sorted {
		if len(out) == 0 || v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
