package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
)

// frontierPoint is one guest group on the cost/isolation plane: what it
// cost (its overhead index) beside how isolated it was (its audit score).
type frontierPoint struct {
	Label string
	// Index is the overhead index: above 1 faster than the baseline,
	// below 1 slower, so higher is cheaper.
	Index stats.Estimate
	// Score is how many audited properties were stronger than the runtime
	// default less how many were weaker, less the escape attempts that
	// reached the host (`audit --attack`): higher isolates more.
	Score, Stronger, Weaker, Escaped int
	// OnFrontier: no other group is at least as cheap and as isolated and
	// better in one of the two.
	OnFrontier bool
}

// frontierOf pairs each group's overhead index with its audit score, in
// column order, and marks the frontier; nil unless at least two groups
// have both, since one point is no trade-off.
func frontierOf(c Comparison) []frontierPoint {
	if c.Audit == nil {
		return nil
	}
	audited := map[string]audit.Group{}
	for _, g := range c.Audit.Groups {
		audited[g.Group] = g
	}
	var pts []frontierPoint
	for j, col := range c.Columns {
		g, ok := audited[col.Group]
		if !ok || j >= len(c.Index) || !finite(c.Index[j].Value) {
			continue
		}
		pts = append(pts, frontierPoint{Label: col.Label(), Index: c.Index[j], Score: g.Stronger - g.Weaker - g.Escaped, Stronger: g.Stronger, Weaker: g.Weaker, Escaped: g.Escaped})
	}
	if len(pts) < 2 {
		return nil
	}
	for i := range pts {
		p := pts[i]
		pts[i].OnFrontier = !slices.ContainsFunc(pts, func(q frontierPoint) bool { return dominates(q, p) })
	}
	return pts
}

// dominates says whether q is at least as cheap and as isolated as p and
// better in one: then nobody would choose p for either.
func dominates(q, p frontierPoint) bool {
	return q.Index.Value >= p.Index.Value && q.Score >= p.Score && (q.Index.Value > p.Index.Value || q.Score > p.Score)
}

// scoreText is a group's audit score with what it adds up.
func (p frontierPoint) scoreText() string {
	sign := ""
	if p.Score > 0 {
		sign = "+"
	}
	if p.Escaped > 0 {
		return fmt.Sprintf("%s%d (%d stronger, %d weaker, %d escaped)", sign, p.Score, p.Stronger, p.Weaker, p.Escaped)
	}
	return fmt.Sprintf("%s%d (%d stronger, %d weaker)", sign, p.Score, p.Stronger, p.Weaker)
}

// frontierChart is the frontier laid out as SVG: audit score across,
// overhead index up.
type frontierChart struct {
	Width, Height            int
	Left, Top, Right, Bottom float64
	XTicks                   []tick
	YTicks                   []yTick
	// OneY is the height of the baseline's index, 1.00.
	OneY float64
	// Line runs through the frontier's points, by score.
	Line   string
	Points []frontierMark
}

// frontierMark is one group's point, with its index's interval as an
// error bar when it has one, and its label beside it.
type frontierMark struct {
	X, Y, LoY, HiY float64
	Bar            bool
	OnFrontier     bool
	Label, Title   string
	TextX, TextY   float64
	Anchor         string
}

const (
	frontierLeft   = 70
	frontierTop    = 24
	frontierWidth  = 600
	frontierHeight = 300
	// frontierLabelGap keeps two labels at about one place apart.
	frontierLabelGap = 14
)

func buildFrontierChart(pts []frontierPoint) *frontierChart {
	if len(pts) < 2 {
		return nil
	}
	ch := &frontierChart{Left: frontierLeft, Top: frontierTop, Right: frontierLeft + frontierWidth, Bottom: frontierTop + frontierHeight}
	ch.Width, ch.Height = int(ch.Right)+30, int(ch.Bottom)+44

	// x: every whole score from one below the lowest to one above the
	// highest, so no point sits on the frame.
	sLo, sHi := pts[0].Score, pts[0].Score
	yHi := 1.0
	for _, p := range pts {
		sLo, sHi = min(sLo, p.Score), max(sHi, p.Score)
		yHi = math.Max(yHi, p.Index.Value)
		if finite(p.Index.High) {
			yHi = math.Max(yHi, p.Index.High)
		}
	}
	sLo, sHi = sLo-1, sHi+1
	x := func(s int) float64 { return ch.Left + float64(s-sLo)/float64(sHi-sLo)*frontierWidth }
	// Groups of one score span two: a step below one would be none.
	xStep := max(1, int(niceStep(float64(sHi-sLo)/12)))
	for s := sLo; s <= sHi; s++ {
		if s%xStep == 0 {
			ch.XTicks = append(ch.XTicks, tick{X: x(s), Label: strconv.Itoa(s)})
		}
	}

	// y: from 0, so that ratios read as lengths.
	step := niceStep(yHi * 1.05 / 5)
	top := math.Ceil(yHi*1.05/step) * step
	y := func(v float64) float64 { return ch.Bottom - math.Max(0, v)/top*frontierHeight }
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	for k := 0; float64(k)*step <= top*(1+1e-9); k++ {
		v := float64(k) * step
		ch.YTicks = append(ch.YTicks, yTick{Y: y(v), Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	ch.OneY = y(1)

	var labels [][2]float64
	for _, p := range pts {
		m := frontierMark{X: x(p.Score), Y: y(p.Index.Value), OnFrontier: p.OnFrontier, Label: p.Label,
			Title: fmt.Sprintf("%s: overhead index %s, audit %s", p.Label, formatEstimate(p.Index), p.scoreText())}
		m.LoY, m.HiY = m.Y, m.Y
		if finite(p.Index.Low) && finite(p.Index.High) && p.Index.High > p.Index.Low {
			m.LoY, m.HiY, m.Bar = y(p.Index.Low), y(p.Index.High), true
		}
		// Labels go right of their point, or left of it in the plot's
		// right quarter, and move down past any label already there.
		m.TextX, m.TextY, m.Anchor = m.X+9, m.Y-9, "start"
		if m.X > ch.Left+frontierWidth*3/4 {
			m.TextX, m.Anchor = m.X-9, "end"
		}
		// A label moves only down, so this ends; and one moved to just
		// below another is clear of it, though l+gap−l may round to a hair
		// under gap.
		for moved := true; moved; {
			moved = false
			for _, l := range labels {
				if below := l[1] + frontierLabelGap; math.Abs(l[0]-m.TextX) < 80 && math.Abs(l[1]-m.TextY) < frontierLabelGap && below > m.TextY {
					m.TextY, moved = below, true
				}
			}
		}
		labels = append(labels, [2]float64{m.TextX, m.TextY})
		ch.Points = append(ch.Points, m)
	}
	var line []frontierMark
	for _, m := range ch.Points {
		if m.OnFrontier {
			line = append(line, m)
		}
	}
	// Across by score; up the index where scores tie.
	slices.SortStableFunc(line, func(a, b frontierMark) int {
		if a.X != b.X {
			return int(math.Copysign(1, a.X-b.X))
		}
		return int(math.Copysign(1, b.Y-a.Y))
	})
	if len(line) > 1 {
		var pts []string
		for _, m := range line {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", m.X, m.Y))
		}
		ch.Line = strings.Join(pts, " ")
	}
	return ch
}

// frontierNote is what the plot and the table show, as both say it.
const frontierNote = "each group's overhead index (↑ cheaper; 1.00 = the baseline) against its audit score " +
	"(properties stronger than the runtime default less those weaker; → more isolated); " +
	"on the frontier: no other group is at least as cheap and as isolated, and better in one"

// writeFrontier prints the frontier's points as a table after the audit.
func writeFrontier(w io.Writer, c Comparison) {
	pts := frontierOf(c)
	if pts == nil {
		return
	}
	fmt.Fprintln(w, "\ncost and isolation: "+frontierNote)
	writeAligned(w, frontierRows(pts), func(int, int) int { return 0 }, false)
}

// frontierRows are the points as a table, its header first.
func frontierRows(pts []frontierPoint) [][]string {
	rows := [][]string{{"technology", "overhead index ↑", "audit score →", "on frontier"}}
	for _, p := range pts {
		rows = append(rows, []string{p.Label, formatEstimate(p.Index), p.scoreText(), yesNo(p.OnFrontier)})
	}
	return rows
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeDropped names the scenario's optional groups the host could not
// run, so their absence from every table is not read as an omission.
func writeDropped(w io.Writer, dropped []store.DroppedGroup) {
	if len(dropped) == 0 {
		return
	}
	fmt.Fprintln(w, "\nnot run here (optional groups this host refused):")
	for _, d := range dropped {
		fmt.Fprintln(w, termtext.Safe(fmt.Sprintf("  %s (%s): %s", d.Name, d.What(), d.Reason)))
	}
}
