// Command vfleet launches fleets of isolated guests, runs standard
// measuring tools inside them and reports what the isolation costs.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI and turns every outcome into an exit status, so no
// panic or stack trace reaches a user: a bug is reported as one line.
func run(args []string) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "vfleet: internal error: %v (please report it with the command you ran)\n", p)
			code = 70
		}
	}()
	cmd := newRootCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "vfleet:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors in how vfleet was called, as opposed to errors in
// what it was asked to do.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }
