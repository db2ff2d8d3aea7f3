package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// recordedAudit is a run's audit from evidence recorded in real guests.
func recordedAudit(t *testing.T) *audit.Report {
	t.Helper()
	var recs []store.AuditRecord
	for _, r := range []struct{ guest, group, file string }{
		{"", "", "host-reference"}, {"host", "host", "host-baseline"}, {"c", "c", "container-default"}, {"u", "u", "container-unconfined"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "audit", "testdata", r.file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.AuditRecord{Guest: r.guest, Group: r.group, Kind: "container", Evidence: b})
	}
	rep, err := audit.Summarize(recs, map[string]store.GuestRecord{"c": {Details: map[string]string{"security": "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &rep
}

func TestAuditInTableAndHTML(t *testing.T) {
	run := store.Run{ID: 3, ScenarioName: "s", Baseline: "host", Status: store.StatusComplete}
	c := Build(run, nil, nil)
	c.Columns = []Column{{Group: "host", Kind: "host", Baseline: true}, {Group: "u", Kind: "container"}, {Group: "c", Kind: "container"}}
	c.Index = make([]stats.Estimate, len(c.Columns))
	c.Audit = recordedAudit(t)
	var table bytes.Buffer
	if err := WriteAudit(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(table.String(), "\n")
	var header, seccomp, score string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "property"):
			header = l
		case strings.HasPrefix(l, "seccomp"):
			seccomp = l
		case strings.HasPrefix(l, "vs runtime default"):
			score = l
		}
	}
	// Columns in the report's order, the baseline first.
	if strings.Index(header, "host") > strings.Index(header, "u [container]") || strings.Index(header, "u [container]") > strings.Index(header, "c [container]") {
		t.Errorf("header order: %q", header)
	}
	if !strings.Contains(seccomp, "none (−)") || !strings.Contains(seccomp, "filter (1)") || !strings.Contains(score, "0 weaker, 0 stronger") {
		t.Errorf("audit table:\n%s", table.String())
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, c, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Isolation audit</h2>", `<td class="worse" title="/proc/self/status Seccomp: Seccomp: 0; Seccomp_filters: 0">none</td>`, "root namespace"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// The escape attempts get a table of their own, a row per attempt: what
// stopped each (the kernel's answer), or that it escaped, in red in HTML;
// the group's score line counts the escapes.
func TestEscapeAttemptsInTableAndHTML(t *testing.T) {
	run := store.Run{ID: 3, ScenarioName: "s", Baseline: "host", Status: store.StatusComplete}
	c := Build(run, nil, nil)
	c.Columns = []Column{{Group: "host", Kind: "host", Baseline: true}, {Group: "u", Kind: "container"}, {Group: "c", Kind: "container"}}
	c.Index = make([]stats.Estimate, len(c.Columns))
	c.Audit = recordedAudit(t)
	for i, g := range c.Audit.Groups {
		switch g.Group {
		case "c":
			c.Audit.Groups[i].Attacks = []audit.Escape{{Attempt: "core_pattern", Technique: "open it", Verdict: audit.EscapeBlocked, Detail: "/: name_to_handle_at: ENOTSUP; open for writing: EROFS"},
				{Attempt: "/proc/1/root", Verdict: audit.EscapeContained, Detail: "its own root"}}
		case "u":
			c.Audit.Groups[i].Attacks = []audit.Escape{{Attempt: "core_pattern", Technique: "open it", Verdict: audit.Escaped, Detail: "opened for writing"}}
			c.Audit.Groups[i].Escaped = 1
		}
	}
	var table bytes.Buffer
	if err := WriteAudit(&table, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	var core, root, score string
	for _, l := range strings.Split(table.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "core_pattern"):
			core = l
		case strings.HasPrefix(l, "/proc/1/root"):
			root = l
		case strings.HasPrefix(l, "vs runtime default"):
			score = l
		}
	}
	if !strings.Contains(table.String(), "escape attempts") || !strings.Contains(core, "ESCAPED") || !strings.Contains(core, "blocked (EROFS)") ||
		strings.Index(core, "ESCAPED") > strings.Index(core, "blocked") || !strings.Contains(root, "contained") || !strings.Contains(score, "1 of 1 escapes reached the host") {
		t.Errorf("escape attempts in the table:\n%s", table.String())
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, c, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h3>Escape attempts</h3>", `<td class="worse" title="open it: opened for writing">ESCAPED</td>`,
		`<td class="better" title="open it: /: name_to_handle_at: ENOTSUP; open for writing: EROFS">blocked (EROFS)</td>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// A long cell (the kernel settings a guest could write) is folded onto
// lines of its own, so the table fits the terminal, and nothing is lost.
func TestAuditFoldsLongCellsToTheWidth(t *testing.T) {
	run := store.Run{ID: 3, ScenarioName: "s", Baseline: "host", Status: store.StatusComplete}
	c := Build(run, nil, nil)
	c.Columns = []Column{{Group: "host", Kind: "host", Baseline: true}, {Group: "u", Kind: "container"}, {Group: "c", Kind: "container"}}
	c.Audit = recordedAudit(t)
	var wide, narrow bytes.Buffer
	if err := WriteAudit(&wide, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteAudit(&narrow, c, TableOptions{Width: 120}); err != nil {
		t.Fatal(err)
	}
	widest := func(s string) int {
		n := 0
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "isolation audit:") && !strings.HasPrefix(l, "reachability") { // prose, not the table
				n = max(n, utf8.RuneCountInString(l))
			}
		}
		return n
	}
	if w := widest(wide.String()); w <= 120 {
		t.Fatalf("the unfolded audit is %d columns: the fixture must not fit in 120", w)
	}
	got := narrow.String()
	if w := widest(got); w > 120 {
		t.Errorf("the folded audit is %d columns wide, want at most 120:\n%s", w, got)
	}
	words := func(s string) []string { w := strings.Fields(s); slices.Sort(w); return w }
	if !slices.Equal(words(got), words(wide.String())) {
		t.Errorf("folding lost or added words:\n%s", got)
	}
	for _, setting := range []string{"/proc/sys/kernel/core_pattern,", "/sys/kernel/mm/ksm/run", "(−)"} {
		if !strings.Contains(got, setting) {
			t.Errorf("the folded audit lacks %q:\n%s", setting, got)
		}
	}
}
