// Package report turns a stored run into what people read: a comparison
// model (repetitions summarised per workload, metric and guest group, each
// group normalised to the baseline), rendered as a terminal table, a
// self-contained HTML page with inline SVG plots, JSON or CSV; the latency
// distributions of metrics that come with histograms, merged per group and
// parameters, with their percentiles and, in HTML, their CDFs; the CPU time
// the measuring tool itself spent, per execution and per unit of work; the
// scaling curves of a workload's headline metric over a parameter that its
// entries vary alone, drawn in HTML by a line plot that takes any series of
// (x, mean, interval) points; and the A/B comparison of two runs, metric by
// metric, each decided worse, better, the same or undecided by
// stats.Decide, as a table, JSON or a self-contained HTML page.
//
// Sample values that are NaN or infinite are kept in the raw exports but
// left out of every statistic, and counted so that each rendering says so.
//
// Every renderer is deterministic for a given run: rows and columns keep
// the order in which the run measured them, floats have fixed formats and
// times come from the run, so outputs can be compared as golden files.
package report
