package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// LatencyRow is the distribution of one latency metric in one guest group
// under one set of parameters (a data path, say): the histograms of every
// repetition and every guest of the group merged into one. Its percentiles
// are read from that merged histogram, never averaged over executions: the
// mean of per-run p99s is not the p99 of anything, and one bad run hides
// behind good ones.
type LatencyRow struct {
	WorkloadID string          `json:"workload_id"`
	Metric     string          `json:"metric"`
	Unit       string          `json:"unit"`
	Better     workload.Better `json:"better"`
	Group      string          `json:"group"`
	Params     workload.Params `json:"params"`
	// Executions is how many histograms were merged (repetitions × guests);
	// Count how many observations they hold.
	Executions int    `json:"executions"`
	Count      uint64 `json:"count"`
	// Skipped counts histograms left out because their unit differed from
	// the first one's, which would make the merge meaningless.
	Skipped int `json:"skipped,omitempty"`
	// Hist is the merged distribution.
	Hist *stats.Histogram `json:"-"`
	// label is the group, with the parameters that tell this row apart
	// from the other rows of its metric.
	label string
}

// latencyPercentiles are the percentiles the latency section shows, in order.
var latencyPercentiles = []struct {
	Name string
	Q    float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p99.9", 0.999}}

// Label names the row within its metric: the group, and the parameters
// that differ between the metric's rows.
func (r LatencyRow) Label() string { return r.label }

// buildLatency merges the histograms of samples by workload, metric,
// parameters and group. Rows come metric by metric in the order the run
// measured them; within a metric, parameters in first-seen order and groups
// in column order (the baseline first).
func buildLatency(samples []store.Sample, columns []Column) []LatencyRow {
	colOrder := map[string]int{}
	for j, c := range columns {
		colOrder[c.Group] = j
	}
	type metricKey struct{ workload, metric string }
	type rowKey struct {
		metricKey
		params, group string
	}
	var metrics []metricKey
	paramOrder := map[metricKey][]string{}
	rows := map[rowKey]*LatencyRow{}
	for _, s := range samples {
		if s.Hist == nil {
			continue
		}
		mk := metricKey{s.WorkloadID, s.Metric}
		if _, ok := paramOrder[mk]; !ok {
			metrics = append(metrics, mk)
			paramOrder[mk] = nil
		}
		ps := paramString(s.Params)
		if !containsString(paramOrder[mk], ps) {
			paramOrder[mk] = append(paramOrder[mk], ps)
		}
		k := rowKey{mk, ps, s.Group}
		row := rows[k]
		if row == nil {
			row = &LatencyRow{WorkloadID: s.WorkloadID, Metric: s.Metric, Unit: s.Hist.Unit(), Better: s.Better, Group: s.Group,
				Params: s.Params, Hist: stats.NewHistogram(s.Hist.Unit())}
			rows[k] = row
		}
		if err := row.Hist.Merge(s.Hist); err != nil {
			row.Skipped++
			continue
		}
		row.Executions++
	}
	var out []LatencyRow
	for _, mk := range metrics {
		var group []LatencyRow
		for _, ps := range paramOrder[mk] {
			var here []LatencyRow
			for k, r := range rows {
				if k.metricKey == mk && k.params == ps {
					here = append(here, *r)
				}
			}
			sort.Slice(here, func(i, j int) bool { return groupLess(colOrder, here[i].Group, here[j].Group) })
			group = append(group, here...)
		}
		labelRows(group)
		out = append(out, group...)
	}
	for i := range out {
		out[i].Count = out[i].Hist.Count()
	}
	return out
}

// labelRows names each row of one metric by its group and by the
// parameters whose values differ between the rows.
func labelRows(rows []LatencyRow) {
	labels := varyingLabels(rows, func(r LatencyRow) (string, workload.Params) { return r.Group, r.Params })
	for i := range rows {
		rows[i].label = labels[i]
	}
}

// varyingLabels names each of a set of rows by its group and by the
// parameters whose values differ between the rows; parameters every row
// shares say nothing and would only lengthen a legend.
func varyingLabels[T any](rows []T, of func(T) (group string, params workload.Params)) []string {
	if len(rows) == 0 {
		return nil
	}
	keys := map[string]bool{}
	params := make([]workload.Params, len(rows))
	groups := make([]string, len(rows))
	for i, r := range rows {
		groups[i], params[i] = of(r)
		for k := range params[i] {
			keys[k] = true
		}
	}
	var varying []string
	for _, k := range sortedStrings(keys) {
		for _, p := range params[1:] {
			if p[k] != params[0][k] {
				varying = append(varying, k)
				break
			}
		}
	}
	labels := make([]string, len(rows))
	for i := range rows {
		var parts []string
		for _, k := range varying {
			parts = append(parts, k+"="+params[i][k])
		}
		labels[i] = groups[i]
		if len(parts) > 0 {
			labels[i] += " · " + strings.Join(parts, " ")
		}
	}
	return labels
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// latencyNote explains histograms left out of a row.
func latencyNote(rows []LatencyRow) string {
	skipped := 0
	for _, r := range rows {
		skipped += r.Skipped
	}
	if skipped == 0 {
		return ""
	}
	return fmt.Sprintf("%d latency histogram(s) were in a different unit from the rest of their metric and are left out of the percentiles.", skipped)
}

// latencyBlock is the rows of one traffic direction: a network workload's
// client in the guest or on the peer. The studies print one table per
// direction, since a path's cost differs between them.
type latencyBlock struct {
	Title string
	Rows  []LatencyRow
}

// latencyBlocks splits rows by direction, keeping their order; rows of a
// single direction make one untitled block.
func latencyBlocks(rows []LatencyRow) []latencyBlock {
	titles := map[string]string{
		workload.ClientGuest: "guest → peer (the client in the guest)",
		workload.ClientPeer:  "peer → guest (the client on the peer)",
	}
	var order []string
	by := map[string][]LatencyRow{}
	for _, r := range rows {
		d := workload.ClientOf(r.Params)
		if _, seen := by[d]; !seen {
			order = append(order, d)
		}
		by[d] = append(by[d], r)
	}
	if len(order) == 1 {
		return []latencyBlock{{Rows: rows}}
	}
	blocks := make([]latencyBlock, len(order))
	for i, d := range order {
		blocks[i] = latencyBlock{Title: titles[d], Rows: by[d]}
	}
	return blocks
}
