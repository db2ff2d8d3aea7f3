// Command vfleet launches fleets of isolated guests, runs standard
// measuring tools inside them and reports what the isolation costs.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vfleet/vfleet/internal/termtext"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// Exit statuses, the contract scripts and CI rely on (README, docs/results.md).
const (
	exitOK = 0
	// exitFailed: vfleet could not do what it was asked, or the run failed
	// (no guest started, the results store refused its samples).
	exitFailed = 1
	// exitUsage: the command line or the scenario is wrong; nothing started.
	exitUsage = 2
	// exitStepsFailed: the run went to its end, but some steps or guests
	// failed (status "complete with failures").
	exitStepsFailed = 3
	// exitInternal: a bug in vfleet (EX_SOFTWARE).
	exitInternal = 70
	// exitInterrupted: the run was interrupted and is stored as incomplete,
	// the status a shell gives a command ended by Ctrl-C.
	exitInterrupted = 130
)

// run executes the CLI and turns every outcome into an exit status, so no
// panic or stack trace reaches a user: a bug is reported as one line.
func run(args []string) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "vfleet: internal error: %v (please report it with the command you ran)\n", p)
			code = exitInternal
		}
	}()
	cmd := newRootCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "vfleet:", safeLines(err.Error()))
		return exitCode(err)
	}
	return exitOK
}

func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailed
}

// exitError ends a command with a given exit status, beside its message.
type exitError struct {
	code int
	error
}

func (e exitError) Unwrap() error { return e.error }

// usageError marks errors in how vfleet was called, as opposed to errors in
// what it was asked to do.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// safeLines escapes the control characters of each line of a message (an
// error may quote a stored run's name or a remote machine's words), and
// keeps its lines: some errors list one problem a line.
func safeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termtext.Safe(l)
	}
	return strings.Join(lines, "\n")
}
