package workload

import (
	"slices"
	"strings"
)

// Role is what a stored metric tells about a guest group, which decides
// the summary it counts in: a technology's cost to a workload and its
// cost to hold guests at all are different questions, and one average of
// both answers neither.
type Role string

const (
	// RolePerformance is a measured workload's own figure: what the
	// technology costs the workload. The overhead index is over these.
	RolePerformance Role = "performance"
	// RoleFootprint is a fleet's start-up and what its guests hold while
	// idle (memory, disk, CPU): the footprint index is over these.
	RoleFootprint Role = "footprint"
	// RoleFleet is a figure the runner derives over a group's guests (a
	// sum of their rates, how far their runs overlapped, the spread of
	// their starts): it restates or qualifies the workload's own figures,
	// so it counts in neither index.
	RoleFleet Role = "fleet"
)

// Pseudo-workloads the runner records for a fleet beside the measured
// ones, under these names as both workload id and workload.
const (
	LaunchWorkload  = "launch"
	DensityWorkload = "density"
)

// Figures the runner derives over a group's guests, stored under the
// group's name.
const (
	// TotalPrefix marks a group's sum over its guests of a rate.
	TotalPrefix = "total."
	// MetricOverlap is the share of the mean run that all the group's
	// guests ran at once: near 100% when the start barrier held.
	MetricOverlap = "fleet.overlap_pct"
	// MetricStartSkew is the spread of the group's start moments.
	MetricStartSkew = "fleet.start_skew_us"
	// MetricFirstRunSpread is the spread of the moments the group's tools
	// first ran after their start: with more tools than CPUs, a scheduler
	// turn (every runnable tool's first slice), so it tells sharing from a
	// late start.
	MetricFirstRunSpread = "fleet.first_run_spread_us"
)

// PhasePrefix starts a launch's figure of one phase of a guest's start
// (guest.Info.Phases) over a group's guests: launch.phase.Ready.p99_s
// (p50, p95, p99, max).
const PhasePrefix = "launch.phase."

// phaseTails are the suffixes of a phase's tail over a group.
var phaseTails = []string{".p50_s", ".p95_s", ".p99_s", ".max_s"}

// GroupFigure reports whether a metric is one the runner derives over a
// group's guests rather than a guest's own.
func GroupFigure(metric string) bool {
	if strings.HasPrefix(metric, PhasePrefix) && slices.ContainsFunc(phaseTails, func(s string) bool { return strings.HasSuffix(metric, s) }) {
		return true
	}
	return strings.HasPrefix(metric, TotalPrefix) || metric == MetricOverlap || metric == MetricStartSkew || metric == MetricFirstRunSpread
}

// RoleOf classifies a stored metric by the workload (adapter name) that
// produced it and its name.
func RoleOf(workload, metric string) Role {
	switch {
	case GroupFigure(metric):
		return RoleFleet
	case workload == LaunchWorkload || workload == DensityWorkload:
		return RoleFootprint
	default:
		return RolePerformance
	}
}
