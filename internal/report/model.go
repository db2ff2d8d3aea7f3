package report

import (
	"math"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// Comparison is a run's results arranged for reading.
type Comparison struct {
	Run      store.Run
	Columns  []Column // the baseline first
	Rows     []Row
	Failures []store.Failure
	// NonFinite counts sample values (NaN, ±Inf) left out of the
	// statistics: they are not measurements, and one would poison a mean.
	NonFinite int
	// Index is each column's overhead index against the baseline over the
	// workloads' performance (parallel to Columns; NaN where nothing is
	// comparable).
	Index []stats.Estimate
	// Footprint is the same index over the fleet's start-up and idle
	// footprint (launch and density rows), nil for a run without them:
	// what holding guests costs, apart from what running a workload does.
	Footprint []stats.Estimate
	// Latency is the merged distribution of every latency metric that
	// came with histograms, per group and parameters.
	Latency []LatencyRow
	// Cost is the CPU time the measuring tool itself spent, per workload
	// entry, parameter set and group, and per unit of work where the
	// workload's headline metric is a rate.
	Cost []CostRow
	// Scaling holds the curves of headline metrics over a parameter, where
	// the run has entries of one workload that differ in that alone.
	Scaling []ScalingCurve
	// Interference is the consolidation matrix; nil unless the run
	// measured workloads both alone and together.
	Interference *Interference
	// Audit is how isolated each group was; nil for a run without one.
	Audit *audit.Report
	// Load is what the host did besides the run during its steps; nil
	// when the caller did not read it (Steps 0: the run has none).
	Load *HostLoad
}

// Column is one guest group.
type Column struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Runtime string `json:"runtime,omitempty"`
	// Arch and Accel are a VM's architecture and accelerator, so that an
	// emulated guest is never read as a KVM one.
	Arch  string `json:"arch,omitempty"`
	Accel string `json:"accel,omitempty"`
	// Platform is how a gVisor container's sandbox runs its processes
	// (ptrace, systrap, kvm): its costs differ by far more than a
	// runtime's usually do.
	Platform string `json:"platform,omitempty"`
	// Security is the profile the group's guests ran under, so that the
	// cost of a configuration is read with how confined it was.
	Security string `json:"security,omitempty"`
	// Libvirt is the URI of the libvirt that ran a VM group's QEMU, empty
	// where vfleet ran it: the same guest either way, told apart.
	Libvirt string `json:"libvirt,omitempty"`
	// Hosts are the hosts whose libvirt ran the group's guests, by the
	// guests' names, when any is another host ("this host" for this
	// one's): a group spread over machines is read as one.
	Hosts    []string `json:"hosts,omitempty"`
	Baseline bool     `json:"baseline"`
}

// Label is how the column is titled: the group, with its kind and runtime
// (and a gVisor sandbox's platform) when the name does not already say it,
// its security profile where its kind has a choice of them, and libvirt
// where libvirt ran it.
func (c Column) Label() string {
	label := c.Group
	if c.Kind != "" && c.Kind != c.Group {
		label += " [" + c.Kind + "]"
	}
	security := c.Security
	if len(guest.TraitsOf(guest.Spec{Kind: c.Kind, Runtime: c.Runtime}).Security) < 2 {
		security = ""
	}
	manager := ""
	if c.Libvirt != "" {
		manager = "libvirt"
	}
	if len(c.Hosts) > 0 {
		manager = "libvirt on " + strings.Join(c.Hosts, ", ")
	}
	if about := strings.TrimSpace(strings.Join([]string{c.Runtime, c.Platform, c.Arch, c.Accel, security, manager}, " ")); about != "" {
		label += " (" + strings.Join(strings.Fields(about), " ") + ")"
	}
	return label
}

// Row is one metric of one workload entry in one case.
type Row struct {
	WorkloadID string `json:"workload_id"`
	// Case names the fleet case the row was measured in ("fleet_size=10
	// noise=cpu"): empty for a run that varies none.
	Case   string          `json:"case,omitempty"`
	Metric string          `json:"metric"`
	Unit   string          `json:"unit"`
	Better workload.Better `json:"better"`
	// Role says which index, if any, the row counts in.
	Role  workload.Role `json:"role"`
	Cells []Cell        `json:"cells"` // parallel to Comparison.Columns
}

// Entry names the row's workload entry and case together, the way tables
// and plots title it.
func (r Row) Entry() string { return entryName(r.WorkloadID, r.Case) }

func entryName(workloadID, c string) string {
	if c == "" {
		return workloadID
	}
	return workloadID + " [" + c + "]"
}

// caseParams are the parameters a fleet adds to its samples to tell its
// cases apart (the scenario package's labels): a row is per case, since
// a value at fleet size 100 or under noise is not a repetition of one at
// size 1 or in quiet.
var caseParams = []string{"fleet_size", "mode", "noise"}

// caseOf names a sample's case from its parameters.
func caseOf(p workload.Params) string {
	var parts []string
	for _, k := range caseParams {
		if v, ok := p[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// entryOf names a sample's workload entry and case.
func entryOf(s store.Sample) string { return entryName(s.WorkloadID, caseOf(s.Params)) }

// Cell summarises one group's repetitions of a row.
type Cell struct {
	Present    bool             `json:"present"` // false: the group has no sample (failed or not run)
	Summary    stats.Summary    `json:"summary"`
	Normalized stats.Normalized `json:"normalized"`
	// Comparable is false when the baseline has no value to normalise to.
	Comparable bool `json:"comparable"`
	values     []float64
}

// Build arranges samples into a Comparison. Samples of all guests of a
// group are pooled: the group is what the scenario compares.
func Build(run store.Run, samples []store.Sample, failures []store.Failure) Comparison {
	c := Comparison{Run: run, Failures: failures}
	colIndex := map[string]int{}
	addColumn := func(group string) int {
		if j, ok := colIndex[group]; ok {
			return j
		}
		col := Column{Group: group, Baseline: group == run.Baseline}
		for _, g := range sortedStrings(run.Guests) {
			if rec := run.Guests[g]; rec.Group == group && col.Kind == "" {
				col.Kind, col.Runtime = rec.Kind, rec.Runtime
				col.Arch, col.Accel, col.Security = rec.Details["arch"], rec.Details["accel"], rec.Details["security"]
				col.Platform = rec.Details["platform"]
				col.Libvirt = rec.Details["libvirt"]
			}
		}
		col.Hosts = libvirtHosts(run.Guests, group)
		colIndex[group] = len(c.Columns)
		c.Columns = append(c.Columns, col)
		return colIndex[group]
	}
	if run.Baseline != "" {
		addColumn(run.Baseline)
	}
	type rowKey struct{ workload, cse, metric string }
	rowIndex := map[rowKey]int{}
	values := map[rowKey]map[string][]float64{}
	for _, s := range samples {
		if col := &c.Columns[addColumn(s.Group)]; col.Kind == "" {
			// A run whose guest records are missing still has its samples'.
			col.Kind, col.Runtime = s.Kind, s.Runtime
		}
		k := rowKey{s.WorkloadID, caseOf(s.Params), s.Metric}
		if _, ok := rowIndex[k]; !ok {
			rowIndex[k] = len(c.Rows)
			c.Rows = append(c.Rows, Row{WorkloadID: s.WorkloadID, Case: k.cse, Metric: s.Metric, Unit: s.Unit, Better: s.Better,
				Role: workload.RoleOf(s.Workload, s.Metric)})
			values[k] = map[string][]float64{}
		}
		if !finite(s.Value) {
			c.NonFinite++
			continue
		}
		values[k][s.Group] = append(values[k][s.Group], s.Value)
	}
	for _, f := range failures {
		if f.Group != "" {
			addColumn(f.Group)
		}
	}
	for i := range c.Rows {
		row := &c.Rows[i]
		k := rowKey{row.WorkloadID, row.Case, row.Metric}
		row.Cells = make([]Cell, len(c.Columns))
		var base stats.Summary
		baseOK := false
		if vs, ok := values[k][run.Baseline]; ok {
			base, baseOK = stats.Summarize(vs, stats.DefaultConfidence), true
		}
		for j, col := range c.Columns {
			vs, ok := values[k][col.Group]
			if !ok {
				continue
			}
			cell := Cell{Present: true, Summary: stats.Summarize(vs, stats.DefaultConfidence), values: vs}
			switch {
			case !baseOK || base.Mean == 0:
				// Nothing to normalise to: the cell keeps its raw summary.
			case col.Baseline:
				// The baseline against itself is 1 exactly; its interval shows
				// its own noise, not that noise counted twice.
				rel := base.RelativeHalfWidth()
				cell.Normalized, cell.Comparable = stats.Normalized{Ratio: 1, CILow: 1 - rel, CIHigh: 1 + rel}, true
			default:
				n := stats.Normalize(cell.Summary, base)
				// A ratio can still overflow when the baseline is tiny.
				cell.Normalized, cell.Comparable = n, finite(n.Ratio) && finite(n.CILow) && finite(n.CIHigh)
			}
			row.Cells[j] = cell
		}
	}
	c.Index, c.Footprint = indexes(c)
	c.Latency = buildLatency(samples, c.Columns)
	c.Cost = buildCost(samples, c.Columns, c.Rows)
	c.Scaling = buildScaling(c, samples)
	c.Interference = buildInterference(c, headlines(samples))
	return c
}

// headlines are, per workload entry, the metrics its workload names as its
// headlines (workload.Headliner); entries of other workloads have none
// here and are summarised by their first metric.
func headlines(samples []store.Sample) map[string][]string {
	out := map[string][]string{}
	for _, s := range samples {
		if _, seen := out[s.WorkloadID]; seen {
			continue
		}
		out[s.WorkloadID] = nil
		if w, err := workload.Lookup(s.Workload); err == nil {
			if h, ok := w.(workload.Headliner); ok {
				out[s.WorkloadID] = h.Headlines()
			}
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// indexes are each column's overhead index and, when the run has
// footprint rows, its footprint index.
func indexes(c Comparison) (overhead, footprint []stats.Estimate) {
	overhead = indexOf(c, workload.RolePerformance)
	if slices.ContainsFunc(c.Rows, func(r Row) bool { return r.Role == workload.RoleFootprint }) {
		footprint = indexOf(c, workload.RoleFootprint)
	}
	return overhead, footprint
}

// indexOf is each column's index over the rows of one role.
func indexOf(c Comparison, role workload.Role) []stats.Estimate {
	base := -1
	for j, col := range c.Columns {
		if col.Baseline {
			base = j
		}
	}
	out := make([]stats.Estimate, len(c.Columns))
	for j, col := range c.Columns {
		if col.Baseline {
			out[j] = stats.Estimate{Value: 1, Low: 1, High: 1}
			continue
		}
		var terms []stats.IndexTerm
		for _, r := range c.Rows {
			if r.Role != role || base < 0 || !r.Cells[j].Present || !r.Cells[base].Present {
				continue
			}
			terms = append(terms, stats.IndexTerm{Workload: r.Entry(), Guest: r.Cells[j].values, Base: r.Cells[base].values,
				LowerIsBetter: r.Better == workload.LowerIsBetter})
		}
		out[j] = stats.OverheadIndex(terms, stats.DefaultConfidence)
	}
	return out
}

// libvirtHosts names the hosts whose libvirt ran a group's guests, each
// once, if any is another host: a remote guest's record names its host
// (libvirt_host), a guest of this host's libvirt does not.
func libvirtHosts(guests map[string]store.GuestRecord, group string) []string {
	var hosts []string
	remote := false
	for _, g := range sortedStrings(guests) {
		rec := guests[g]
		if rec.Group != group || rec.Details["libvirt"] == "" {
			continue
		}
		host := rec.Details["libvirt_host"]
		if host != "" {
			remote = true
		} else {
			host = "this host"
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	if !remote {
		return nil
	}
	return hosts
}
