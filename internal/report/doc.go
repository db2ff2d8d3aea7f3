// Package report turns a stored run into what people read: a comparison
// model (repetitions summarised per workload, metric and guest group, each
// group normalised to the baseline), rendered as a terminal table, a
// self-contained HTML page with inline SVG plots, JSON or CSV.
//
// Every renderer is deterministic for a given run: rows and columns keep
// the order in which the run measured them, floats have fixed formats and
// times come from the run, so outputs can be compared as golden files.
package report
