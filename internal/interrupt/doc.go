// Package interrupt turns the first SIGINT or SIGTERM a command gets into
// the cancel of its context, so that what it started is torn down before
// it exits; a second one is left to its default action, so an impatient
// user can still kill it. The signal is the context's cause, so that a
// stored run can say what interrupted it.
package interrupt
