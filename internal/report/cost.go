package report

import (
	"math"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// CostRow is the CPU time the measuring tool's own processes spent, for one
// workload entry, parameter set and guest group, over its executions. It is
// the tool's user and system time only: work the kernel does on the tool's
// behalf in other contexts (softirq on another CPU, a vhost thread, the
// peer's server) is not in it, so it bounds the cost of a data path from
// below rather than measuring all of it.
type CostRow struct {
	WorkloadID string          `json:"workload_id"`
	Workload   string          `json:"workload"`
	Group      string          `json:"group"`
	Params     workload.Params `json:"params"`
	// Executions is how many executions the figures cover (repetitions ×
	// guests of the group), each counted once however many samples it gave.
	Executions int `json:"executions"`
	// CPUSeconds and WallSeconds summarise each execution's tool CPU time
	// and wall time; Cores their ratio per execution (1.0: one core busy
	// the whole time).
	CPUSeconds  stats.Summary `json:"cpu_seconds"`
	WallSeconds stats.Summary `json:"wall_seconds"`
	Cores       stats.Summary `json:"cores"`
	// PerUnit is the CPU time per unit of work, nil when the workload's
	// headline metric is not a rate.
	PerUnit *UnitCost `json:"per_unit"`
	label   string
}

// Label names the row within its workload entry: the group, and the
// parameters that differ between the entry's rows.
func (r CostRow) Label() string { return r.label }

// UnitCost is CPU time per unit of work: each execution's tool CPU seconds
// divided by the work it did, its headline rate times its wall time.
type UnitCost struct {
	Metric   string `json:"metric"`    // the headline rate
	RateUnit string `json:"rate_unit"` // its unit, e.g. "events/s"
	Unit     string `json:"unit"`      // the unit of the cost, e.g. "ns/event"
	// Executions is how many executions had a positive rate: one that did
	// no work has no cost per unit.
	Executions int           `json:"executions"`
	Summary    stats.Summary `json:"summary"`
	// Ratio is the cost relative to the baseline group's for the same
	// entry, lower is better; nil when the baseline has no cost to divide by.
	Ratio  *stats.Normalized `json:"ratio"`
	values []float64         // seconds per unit of the rate's numerator
}

// workUnit says how to read CPU seconds per unit of a rate. A byte or bit
// rate is charged per gigabyte, as network and storage costs are usually
// quoted; IOPS per IO in µs; any other rate ("events/s", "ops/s") per thing
// in the time unit that suits its size.
type workUnit struct {
	// bytes is how many bytes one unit of the rate's numerator is; 0 for
	// a count of things.
	bytes float64
	io    bool
	thing string // the singular noun of a count: "event", "op"
}

// parseRateUnit reads a rate unit; ok is false for a unit that is not work
// over time. A rate divided by something else ("bit/s per core") is not:
// multiplied by a wall time it counts nothing.
func parseRateUnit(unit string) (workUnit, bool) {
	if unit == "IOPS" {
		return workUnit{io: true}, true
	}
	if strings.Contains(unit, " per ") {
		return workUnit{}, false
	}
	if strings.HasPrefix(unit, "bit/s") {
		return workUnit{bytes: 1.0 / 8}, true
	}
	num, ok := strings.CutSuffix(unit, "/s")
	if !ok || num == "" {
		return workUnit{}, false
	}
	if b, ok := byteUnits[num]; ok {
		return workUnit{bytes: b}, true
	}
	return workUnit{thing: singular(num)}, true
}

var byteUnits = map[string]float64{
	"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"bit": 1.0 / 8, "kbit": 1e3 / 8, "Mbit": 1e6 / 8, "Gbit": 1e9 / 8,
}

// singular turns the plural noun of a rate ("events", "bogo ops") into the
// one a cost is per; other nouns stay as they are.
func singular(noun string) string {
	if len(noun) > 2 && strings.HasSuffix(noun, "s") && !strings.HasSuffix(noun, "ss") {
		return noun[:len(noun)-1]
	}
	return noun
}

// display picks the unit a cost is shown in and the factor from seconds
// per unit of the rate's numerator; ref, a typical cost in those seconds,
// picks the time unit of a count so that its figures read as 1 to 999.
func (u workUnit) display(ref float64) (unit string, factor float64) {
	switch {
	case u.io:
		return "µs/IO", 1e6
	case u.bytes > 0:
		return "CPU s/GB", 1e9 / u.bytes
	}
	for _, t := range []struct {
		name  string
		scale float64
	}{{"ns", 1e9}, {"µs", 1e6}, {"ms", 1e3}} {
		if ref*t.scale < 1000 {
			return t.name + "/" + u.thing, t.scale
		}
	}
	return "s/" + u.thing, 1
}

// execution is one run of the tool: every sample it gave carries the same
// CPU and wall time, so it is counted once.
type execution struct {
	workloadID, params, group string
	cpuNS, wallNS             int64
	rate                      float64 // the headline metric's value; NaN when absent
}

// buildCost sums up the tool's CPU time per workload entry, parameter set
// and group. An entry's work is counted in its headline metric, its first
// row in rows. Rows come entry by entry in the order of the table,
// within an entry parameter sets in first-seen order and groups in column
// order.
func buildCost(samples []store.Sample, columns []Column, rows []Row) []CostRow {
	headline := map[string]Row{}
	var entries []string
	for _, r := range rows {
		if _, ok := headline[r.WorkloadID]; !ok {
			headline[r.WorkloadID] = r
			entries = append(entries, r.WorkloadID)
		}
	}
	type execKey struct {
		guest, workloadID, params string
		repetition                int
	}
	execs := map[execKey]*execution{}
	var order []execKey
	paramsOf := map[string]workload.Params{}
	adapter := map[string]string{}
	for _, s := range samples {
		// No wall time: the execution's times were not recorded (a run from
		// before they were), which is not an execution that took none.
		if s.WallNS <= 0 || s.CPUNS < 0 {
			continue
		}
		ps := paramString(s.Params)
		k := execKey{s.Guest, s.WorkloadID, ps, s.Repetition}
		e := execs[k]
		if e == nil {
			e = &execution{workloadID: s.WorkloadID, params: ps, group: s.Group, cpuNS: s.CPUNS, wallNS: s.WallNS, rate: math.NaN()}
			execs[k] = e
			order = append(order, k)
			if _, ok := paramsOf[ps]; !ok {
				paramsOf[ps] = s.Params
			}
			adapter[s.WorkloadID] = s.Workload
		}
		if h, ok := headline[s.WorkloadID]; ok && s.Metric == h.Metric && math.IsNaN(e.rate) {
			e.rate = s.Value
		}
	}
	colOrder := map[string]int{}
	for j, c := range columns {
		colOrder[c.Group] = j
	}
	type rowKey struct{ workloadID, params, group string }
	byRow := map[rowKey][]*execution{}
	paramOrder := map[string][]string{}
	for _, k := range order {
		e := execs[k]
		rk := rowKey{e.workloadID, e.params, e.group}
		if byRow[rk] == nil && !containsString(paramOrder[e.workloadID], e.params) {
			paramOrder[e.workloadID] = append(paramOrder[e.workloadID], e.params)
		}
		byRow[rk] = append(byRow[rk], e)
	}
	var out []CostRow
	for _, id := range entries {
		var entry []CostRow
		for _, ps := range paramOrder[id] {
			var here []CostRow
			for rk, es := range byRow {
				if rk.workloadID == id && rk.params == ps {
					here = append(here, costRow(rk.group, paramsOf[ps], adapter[id], headline[id], es))
				}
			}
			sort.Slice(here, func(i, j int) bool { return groupLess(colOrder, here[i].Group, here[j].Group) })
			entry = append(entry, here...)
		}
		if len(entry) == 0 {
			continue
		}
		labels := varyingLabels(entry, func(r CostRow) (string, workload.Params) { return r.Group, r.Params })
		for i := range entry {
			entry[i].label = labels[i]
		}
		scalePerUnit(entry, columns)
		out = append(out, entry...)
	}
	return out
}

// groupLess orders groups as the columns are (the baseline first), groups
// without a column last by name.
func groupLess(colOrder map[string]int, a, b string) bool {
	ca, aok := colOrder[a]
	cb, bok := colOrder[b]
	if aok != bok {
		return aok
	}
	if ca != cb {
		return ca < cb
	}
	return a < b
}

// costRow summarises one row's executions; the per-unit values stay in
// seconds until scalePerUnit picks the entry's unit.
func costRow(group string, params workload.Params, adapter string, headline Row, es []*execution) CostRow {
	r := CostRow{WorkloadID: headline.WorkloadID, Workload: adapter, Group: group, Params: params, Executions: len(es)}
	var cpu, wall, cores []float64
	_, isRate := parseRateUnit(headline.Unit)
	var perUnit []float64
	for _, e := range es {
		c, w := float64(e.cpuNS)/1e9, float64(e.wallNS)/1e9
		cpu, wall, cores = append(cpu, c), append(wall, w), append(cores, c/w)
		if isRate && finite(e.rate) && e.rate > 0 {
			perUnit = append(perUnit, c/(e.rate*w))
		}
	}
	r.CPUSeconds = stats.Summarize(cpu, stats.DefaultConfidence)
	r.WallSeconds = stats.Summarize(wall, stats.DefaultConfidence)
	r.Cores = stats.Summarize(cores, stats.DefaultConfidence)
	if isRate && len(perUnit) > 0 {
		r.PerUnit = &UnitCost{Metric: headline.Metric, RateUnit: headline.Unit, Executions: len(perUnit), values: perUnit}
	}
	return r
}

// scalePerUnit puts the per-unit costs of one entry's rows into one unit,
// chosen by the baseline's cost (or the first row's), and normalises each to
// the baseline: the baseline row with the same parameters, or its only row
// of the entry when the parameters differ by group (a data path).
func scalePerUnit(entry []CostRow, columns []Column) {
	baseline := ""
	for _, c := range columns {
		if c.Baseline {
			baseline = c.Group
		}
	}
	var baseRows []int
	refRow := -1
	for i, r := range entry {
		if r.PerUnit == nil {
			continue
		}
		if r.Group == baseline {
			baseRows = append(baseRows, i)
		}
		if refRow < 0 || r.Group == baseline && len(baseRows) == 1 {
			refRow = i
		}
	}
	if refRow < 0 {
		return
	}
	ref := stats.Summarize(entry[refRow].PerUnit.values, stats.DefaultConfidence).Mean
	for i := range entry {
		pu := entry[i].PerUnit
		if pu == nil {
			continue
		}
		wu, _ := parseRateUnit(pu.RateUnit)
		unit, factor := wu.display(ref)
		scaled := make([]float64, len(pu.values))
		for k, v := range pu.values {
			scaled[k] = v * factor
		}
		pu.Unit, pu.Summary = unit, stats.Summarize(scaled, stats.DefaultConfidence)
	}
	for i := range entry {
		pu := entry[i].PerUnit
		if pu == nil {
			continue
		}
		var base *UnitCost
		for _, b := range baseRows {
			if paramString(entry[b].Params) == paramString(entry[i].Params) {
				base = entry[b].PerUnit
			}
		}
		if base == nil && len(baseRows) == 1 {
			base = entry[baseRows[0]].PerUnit
		}
		switch {
		case base == nil || base.Summary.Mean == 0:
		case entry[i].Group == baseline:
			// As in the table: the baseline against itself is 1 exactly, its
			// interval its own noise.
			rel := base.Summary.RelativeHalfWidth()
			pu.Ratio = &stats.Normalized{Ratio: 1, CILow: 1 - rel, CIHigh: 1 + rel}
		default:
			if n := stats.Normalize(pu.Summary, base.Summary); finite(n.Ratio) && finite(n.CILow) && finite(n.CIHigh) {
				pu.Ratio = &n
			}
		}
	}
}
