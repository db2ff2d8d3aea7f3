package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/audit"
)

// auditCell is one group's value of one audited property.
type auditCell struct {
	Text     string
	Evidence string // the probe and its raw evidence
	Verdict  audit.Verdict
}

// Class colours the cell in HTML: "worse" weaker than the runtime default,
// "better" stronger.
func (c auditCell) Class() string {
	switch c.Verdict {
	case audit.Weaker:
		return "worse"
	case audit.Stronger:
		return "better"
	}
	return ""
}

// auditTable is the audit laid out as reports show it: a row per property,
// a column per group, then the scores against the runtime default, and the
// reachability matrix (a row per group, a column per target).
type auditTable struct {
	Groups  []string
	Rows    []auditRow
	Scores  []string
	Targets []string
	Reach   []auditRow
	// Attacks are the escape attempts, a row each, when they were made.
	Attacks []auditRow
}

type auditRow struct {
	Name  string
	Cells []auditCell
}

// verdictMarks are how the terminal marks a finding that differs from the
// runtime default.
var verdictMarks = map[audit.Verdict]string{audit.Weaker: " (−)", audit.Stronger: " (+)"}

func buildAuditTable(rep *audit.Report, columns []Column) *auditTable {
	if rep == nil || len(rep.Groups) == 0 {
		return nil
	}
	labels := map[string]string{}
	for _, c := range columns {
		labels[c.Group] = c.Label()
	}
	t := &auditTable{Targets: rep.Targets}
	for _, p := range audit.Properties {
		t.Rows = append(t.Rows, auditRow{Name: p})
	}
	attempts := attemptNames(rep.Groups)
	for _, a := range attempts {
		t.Attacks = append(t.Attacks, auditRow{Name: a})
	}
	for _, g := range inColumnOrder(rep.Groups, columns) {
		label := labels[g.Group]
		if label == "" {
			label = Column{Group: g.Group, Kind: g.Kind, Security: g.Security}.Label()
		}
		t.Groups = append(t.Groups, label)
		byProperty := map[string]audit.Finding{}
		for _, f := range g.Findings {
			byProperty[f.Property] = f
		}
		for i, p := range audit.Properties {
			f := byProperty[p]
			t.Rows[i].Cells = append(t.Rows[i].Cells, auditCell{Text: f.Value, Evidence: f.Probe + ": " + f.Evidence, Verdict: f.Verdict})
		}
		byAttempt := map[string]audit.Escape{}
		for _, e := range g.Attacks {
			byAttempt[e.Attempt] = e
		}
		for i, a := range attempts {
			t.Attacks[i].Cells = append(t.Attacks[i].Cells, escapeCell(byAttempt[a]))
		}
		score := fmt.Sprintf("%d weaker, %d stronger", g.Weaker, g.Stronger)
		if len(g.Attacks) > 0 {
			score += fmt.Sprintf("; %d of %d escapes reached the host", g.Escaped, len(g.Attacks))
		}
		if len(g.Differing) > 0 {
			score += fmt.Sprintf("; %d guest(s) differ from %s", len(g.Differing), g.Guest)
		}
		t.Scores = append(t.Scores, score)
		if len(rep.Targets) > 0 {
			row := auditRow{Name: label}
			for _, target := range rep.Targets {
				r, tried := g.Reach[target]
				cell := auditCell{Text: "—"}
				switch {
				case !tried:
				case r.Reached == r.Tried:
					cell = auditCell{Text: reachText(r), Evidence: "TCP handshake answered"}
				default:
					cell = auditCell{Text: reachText(r), Evidence: r.Why}
				}
				row.Cells = append(row.Cells, cell)
			}
			t.Reach = append(t.Reach, row)
		}
	}
	return t
}

// inColumnOrder orders the audited groups as the report's columns are,
// the baseline first; groups with no column follow.
func inColumnOrder(groups []audit.Group, columns []Column) []audit.Group {
	rank := map[string]int{}
	for i, c := range columns {
		rank[c.Group] = i
	}
	out := slices.Clone(groups)
	slices.SortStableFunc(out, func(a, b audit.Group) int {
		ra, okA := rank[a.Group]
		rb, okB := rank[b.Group]
		switch {
		case okA && okB:
			return ra - rb
		case okA:
			return -1
		case okB:
			return 1
		}
		return 0
	})
	return out
}

// attemptNames are the escape attempts any group made, in the order the
// first that made them did.
func attemptNames(groups []audit.Group) []string {
	var names []string
	for _, g := range groups {
		for _, e := range g.Attacks {
			if !slices.Contains(names, e.Attempt) {
				names = append(names, e.Attempt)
			}
		}
	}
	return names
}

// escapeCell shows an attempt's verdict with the kernel's answer that
// stopped it, or, for one that went through, where the evidence is. A
// blocked attempt counts as stronger, one that escaped as weaker.
func escapeCell(e audit.Escape) auditCell {
	switch e.Verdict {
	case audit.EscapeBlocked:
		return auditCell{Text: "blocked (" + answerOf(e.Detail) + ")", Evidence: e.Technique + ": " + e.Detail, Verdict: audit.Stronger}
	case audit.EscapeContained:
		return auditCell{Text: "contained", Evidence: e.Technique + ": " + e.Detail, Verdict: audit.Info}
	case audit.Escaped:
		return auditCell{Text: "ESCAPED", Evidence: e.Technique + ": " + e.Detail, Verdict: audit.Weaker}
	}
	return auditCell{Text: "—"}
}

// answerOf is the kernel's answer at the end of an attempt's last
// refusal ("…; open: EPERM" is EPERM), short enough for a cell: an
// attempt tries its easier ways first (a file system that has no handles,
// then one bound in from the host), so the last is the one that mattered.
func answerOf(by string) string {
	parts := strings.Split(by, "; ")
	last := parts[len(parts)-1]
	if i := strings.LastIndex(last, ": "); i >= 0 {
		last = last[i+2:]
	}
	if f := strings.Fields(last); len(f) > 0 {
		last = f[0]
	}
	return last
}

func reachText(r audit.Reach) string {
	switch {
	case r.Tried == 1 && r.Reached == 1:
		return "yes"
	case r.Tried == 1:
		return "no"
	}
	return fmt.Sprintf("%d of %d", r.Reached, r.Tried)
}

// writeAudit prints the audit after the overhead figures: how much
// isolation each group had, beside what it cost. Cells too long for width
// columns (a list of writable kernel settings) are folded.
func writeAudit(w io.Writer, rep *audit.Report, columns []Column, width int) {
	t := buildAuditTable(rep, columns)
	if t == nil {
		return
	}
	fmt.Fprintln(w, "\nisolation audit: read-only probes in each group's first guest, against what a container runtime deploys by default; (−) weaker, (+) stronger")
	writeAuditRows(w, append([]string{"property"}, t.Groups...), t.Rows, []string{"vs runtime default"}, t.Scores, true, width)
	if len(t.Attacks) > 0 {
		fmt.Fprintln(w, "escape attempts in each group's first guest, each stopped before it could change anything: blocked (the kernel's answer), contained (it reached the guest's own kernel, root or namespaces), or ESCAPED (it reached the host); --json has each one's evidence")
		writeAuditRows(w, append([]string{"attempt"}, t.Groups...), t.Attacks, nil, nil, false, width)
	}
	if len(t.Reach) > 0 {
		fmt.Fprintln(w, "reachability (a TCP handshake from the group's guests; a refusal counts as reached)")
		writeAuditRows(w, append([]string{"from → to"}, t.Targets...), t.Reach, nil, nil, false, width)
	}
}

// writeAuditRows prints one of the audit's tables under its header, with
// a last line when one is given, each cell marked with its verdict when
// marks is set, folded to width.
func writeAuditRows(w io.Writer, header []string, body []auditRow, lastName, last []string, marks bool, width int) {
	rows := [][]string{header}
	for _, r := range body {
		line := []string{r.Name}
		for _, c := range r.Cells {
			if marks {
				line = append(line, c.Text+verdictMarks[c.Verdict])
			} else {
				line = append(line, c.Text)
			}
		}
		rows = append(rows, line)
	}
	if last != nil {
		rows = append(rows, append(lastName, last...))
	}
	writeAligned(w, foldCells(rows, width), func(int, int) int { return 0 }, false)
}

// WriteAudit prints the audit of a comparison alone, with its failures
// (`vfleet audit`), folded to opts.Width.
func WriteAudit(out io.Writer, c Comparison, opts TableOptions) error {
	w := &stickyWriter{w: out}
	writeAudit(w, c.Audit, c.Columns, opts.Width)
	writeFailures(w, c.Failures)
	return w.err
}
