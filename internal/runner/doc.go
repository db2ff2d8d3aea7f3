// Package runner executes a scenario Plan: it records the run, starts the
// guests, runs every step through the guests' agents, stores each step's
// samples the moment they are parsed, and tears everything down.
//
// Lifecycle of a run: the run row is created first (status running) so that
// whatever is measured is kept even if vfleet dies; every resource is
// recorded in the run's ledger before it exists; a failing step is recorded
// as a failure and the run goes on; cancellation (Ctrl-C) stops at the
// current step, tears down with a fresh bounded context and marks the run
// incomplete.
package runner
