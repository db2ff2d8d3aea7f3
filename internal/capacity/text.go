package capacity

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/report"
)

// Headline says the answer in a sentence or two: the size, how sure, the
// size above it and the SLO that stops it there, the undecided band.
func (r *Result) Headline(slos []SLO) string {
	conf := fmt.Sprintf("%.0f%% confidence", 100*r.Confidence)
	var b strings.Builder
	switch r.Outcome {
	case Found:
		fmt.Fprintf(&b, "largest size that meets every SLO: %d (holds with %s)", r.Answer, conf)
	case FirstFails:
		b.WriteString("no size meets every SLO: not even one guest")
	case HitMax:
		fmt.Fprintf(&b, "every size up to the maximum meets every SLO: %d (holds with %s); raise --max to search further", r.Answer, conf)
	case HitLimit:
		fmt.Fprintf(&b, "largest size the host can hold meets every SLO: %d (holds with %s); more do not fit (%s)", r.Answer, conf, r.LimitReason)
	case OutOfBudget:
		fmt.Fprintf(&b, "the search used its %d measurements before it was done: %d holds with %s", r.Measurements, r.Answer, conf)
	}
	if p := r.point(r.Next); p != nil && r.Limiting >= 0 {
		c := p.Checks[r.Limiting]
		verb := "fails"
		if c.Verdict == Undecided {
			verb = "is undecided for"
		}
		fmt.Fprintf(&b, "; %d %s `%s` (%s)", p.Size, verb, slos[c.SLO].Text, formatCheck(slos[c.SLO], c))
	}
	if len(r.HoldsAbove) > 0 {
		fmt.Fprintf(&b, "; yet %s above it held (see the revised verdicts in the table: the figures do not fall steadily with the fleet)", join(r.HoldsAbove, ", "))
	}
	switch {
	case r.BandLow > 0 && r.BandLow == r.BandHigh:
		fmt.Fprintf(&b, "; %d is undecided at this confidence", r.BandLow)
	case r.BandLow > 0:
		fmt.Fprintf(&b, "; %d to %d are undecided at this confidence", r.BandLow, r.BandHigh)
	}
	return b.String()
}

func (r *Result) point(size int) *Point {
	for i := range r.Points {
		if r.Points[i].Size == size {
			return &r.Points[i]
		}
	}
	return nil
}

// WriteTable writes every size measured: its verdict, each SLO's figure
// with its interval, and the runs it was measured in.
func (r *Result) WriteTable(w io.Writer, slos []SLO) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "SIZE\tVERDICT")
	for _, s := range slos {
		fmt.Fprintf(tw, "\t%s", s.Text)
	}
	fmt.Fprintln(tw, "\tRUNS")
	for _, p := range r.Points {
		verdict := string(p.Verdict)
		if p.Revised {
			verdict += " (revised)"
		}
		fmt.Fprintf(tw, "%d\t%s", p.Size, verdict)
		for i := range slos {
			cell := "—"
			for _, c := range p.Checks {
				if c.SLO == i {
					cell = formatCheck(slos[i], c)
				}
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintf(tw, "\t%s\n", join(p.Measurements, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Reference) > 0 {
		_, err := fmt.Fprintf(w, "one guest alone measured again for the ratios to alone: runs %s\n", join(r.Reference, ","))
		return err
	}
	return nil
}

func join[T int | int64](xs []T, sep string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return strings.Join(out, sep)
}

// formatCheck writes a check's figure with its interval, in the bound's
// terms: a ratio, or a duration in microseconds.
func formatCheck(s SLO, c Check) string {
	unit, scale := "", 1.0
	if s.Duration {
		unit, scale = "µs", 1e6
	}
	out := fmt.Sprintf("%.3g%s [%.3g, %.3g] %s", c.Value*scale, unit, c.Low*scale, c.High*scale, c.Verdict)
	if c.Verdict == Undecided {
		// What the size's looks could not decide, at the repetitions
		// they had.
		out += fmt.Sprintf(" at %d", c.N)
	}
	if c.Missing > 0 {
		out += fmt.Sprintf(", %d repetitions missing a guest", c.Missing)
	}
	return out
}

// Describe is one line on a size as measured so far, for progress.
func (p Point) Describe(slos []SLO) string {
	parts := make([]string, len(p.Checks))
	for i, c := range p.Checks {
		parts[i] = fmt.Sprintf("`%s` %s", slos[c.SLO].Text, formatCheck(slos[c.SLO], c))
	}
	return fmt.Sprintf("size %d (measurement %d): %s; %s", p.Size, len(p.Measurements), p.Verdict, strings.Join(parts, "; "))
}

// Page is the search as an HTML page's content: a chart per SLO of its
// figure at every size measured, in the bound's terms (a duration in
// microseconds).
func (r *Result) Page(title string, slos []SLO, host hostinfo.Fingerprint) (report.CapacityPage, error) {
	var table strings.Builder
	if err := r.WriteTable(&table, slos); err != nil {
		return report.CapacityPage{}, err
	}
	page := report.CapacityPage{Title: title, Headline: r.Headline(slos), Table: table.String(), Host: host}
	for i, s := range slos {
		unit, scale := "", 1.0
		if s.Duration {
			unit, scale = "us", 1e6
		}
		chart := report.CapacityChart{SLO: s.Text, Unit: unit, Bound: s.Bound * scale, Answer: r.Answer}
		for _, p := range r.Points {
			for _, c := range p.Checks {
				if c.SLO == i {
					chart.Points = append(chart.Points, report.Point{X: float64(p.Size), Y: c.Value * scale, Low: c.Low * scale, High: c.High * scale, N: c.N})
				}
			}
		}
		page.Charts = append(page.Charts, chart)
	}
	return page, nil
}
