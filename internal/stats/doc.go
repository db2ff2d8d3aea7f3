// Package stats owns the arithmetic that turns raw samples into statements:
// summaries with confidence intervals and values normalised to a baseline.
// Every function is pure and deterministic.
//
// Decide is how a comparison of many metrics is decided as repetitions
// come: each metric same, higher, lower or undecided, its errors bounded
// over every look and every metric of the family (sequential.go).
// LookLevels spends an error the same way over the looks at one question
// (a capacity search's repeated measurements of one fleet size).
//
// Histogram keeps a whole latency distribution in mergeable form: the
// percentiles of several executions come from merging their histograms,
// never from averaging their percentiles.
package stats
