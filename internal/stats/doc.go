// Package stats owns the arithmetic that turns raw samples into statements:
// summaries with confidence intervals and values normalised to a baseline.
// Every function is pure and deterministic.
package stats
