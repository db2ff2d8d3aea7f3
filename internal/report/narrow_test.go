package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// manyGroups is a run of the shape of netpath-latency: a baseline and six
// groups side by side, too wide for a terminal in the wide form.
func manyGroups() Comparison {
	run := store.Run{ID: 3, ScenarioName: "netpath-latency", Baseline: "host", Status: store.StatusComplete, Guests: map[string]store.GuestRecord{}}
	var samples []store.Sample
	groups := []string{"host", "c-bridge", "c-routed", "c-macvlan", "c-xdp", "c-tc", "c-veth"}
	for g, group := range groups {
		run.Guests[group] = store.GuestRecord{Group: group, Kind: "container", Runtime: "runc"}
		for rep := range 3 {
			for _, m := range []struct {
				name string
				v    float64
			}{{"rtt_p50", 20 + float64(g)}, {"rtt_p99_9", 80 + float64(g*rep)}} {
				samples = append(samples, store.Sample{RunID: 3, Guest: group, Group: group, Kind: "container", Runtime: "runc",
					WorkloadID: "net-latency", Workload: "net-latency", Repetition: rep, Metric: m.name, Unit: "us",
					Value: m.v, Better: workload.LowerIsBetter})
			}
		}
	}
	return Build(run, samples, nil)
}

func TestComparisonFitsTheTerminalAsBlocks(t *testing.T) {
	c := manyGroups()
	var wide, narrow bytes.Buffer
	if err := WriteTable(&wide, c, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&narrow, c, TableOptions{Width: 100}); err != nil {
		t.Fatal(err)
	}
	widest := func(s string) int {
		n := 0
		for _, l := range strings.Split(s, "\n") {
			n = max(n, utf8.RuneCountInString(l))
		}
		return n
	}
	ratios := func(s string) string { return s[:strings.Index(s, "↑ higher is better")] }
	if w := widest(ratios(wide.String())); w <= 100 {
		t.Fatalf("the wide form is %d columns: the fixture must not fit in 100", w)
	}
	got := ratios(narrow.String())
	if w := widest(got); w > 100 {
		t.Errorf("the narrow form is %d columns wide, want at most 100:\n%s", w, got)
	}
	// Every metric heads a block, and every group has its row in each.
	for _, metric := range []string{"net-latency rtt_p50 ↓", "net-latency rtt_p99_9 ↓", "overhead index ↑"} {
		block := got[strings.Index(got, metric):]
		for _, g := range c.Columns {
			if !strings.Contains(block, fmt.Sprintf("\n  %s ", g.Label())) {
				t.Errorf("block %q lacks a row for %s:\n%s", metric, g.Label(), got)
			}
		}
	}
	if !strings.Contains(got, "1.00 (20.00 us)") {
		t.Errorf("the baseline's value is missing:\n%s", got)
	}
}
