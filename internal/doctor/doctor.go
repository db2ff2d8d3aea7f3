package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Status is a check's outcome.
type Status string

const (
	OK      Status = "ok"
	Warn    Status = "warn"    // works, with a caveat
	Missing Status = "missing" // not installed
	Fail    Status = "fail"    // present but does not work
	Skip    Status = "skip"    // could not be checked
)

// defaultTimeout bounds a check that sets none: plenty for reading /proc or
// loading a BPF program, short enough that a wedged probe cannot stall doctor.
const defaultTimeout = 10 * time.Second

// Result is what one check found.
type Result struct {
	Name   string
	Status Status
	Detail string
	Fix    string // what to do about it, empty when nothing needs doing
}

// Check is one probe of the host. Run must return once ctx is done.
type Check struct {
	Name    string
	Timeout time.Duration // zero means defaultTimeout
	Run     func(ctx context.Context) Result
}

// Run runs the checks concurrently, each under its own timeout, and returns
// their results in the checks' order. Concurrency keeps doctor as quick as
// its slowest probe (booting a kernel under emulation) rather than the sum
// of them. progress, if set, is called as each check finishes, one call at
// a time.
func Run(ctx context.Context, checks []Check, progress func(Result)) []Result {
	results := make([]Result, len(checks))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout := c.Timeout
			if timeout == 0 {
				timeout = defaultTimeout
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r := c.Run(cctx)
			r.Name = c.Name
			results[i] = r
			if progress != nil {
				mu.Lock()
				defer mu.Unlock()
				progress(r)
			}
		}()
	}
	wg.Wait()
	return results
}

// Write renders results as aligned columns, each fix on the line beneath
// its check, and a count of each status at the end.
func Write(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	counts := map[Status]int{}
	for _, r := range results {
		counts[r.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(string(r.Status)), r.Name, r.Detail)
		if r.Fix != "" {
			fmt.Fprintf(tw, "\t\t→ %s\n", r.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d ok, %d warnings, %d missing, %d failing, %d skipped\n",
		counts[OK], counts[Warn], counts[Missing], counts[Fail], counts[Skip])
	return err
}
