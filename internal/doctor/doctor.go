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
	Fail    Status = "fail"    // installed but does not work
	Skip    Status = "skip"    // could not be checked
)

// Result is what one check found.
type Result struct {
	Name   string
	Status Status
	Detail string
	Fix    string // what to do about it, empty when nothing needs doing
}

// Check is one probe of the host.
type Check struct {
	Name    string
	Timeout time.Duration
	Run     func(ctx context.Context) Result
}

// Run runs the checks concurrently (probes that boot a kernel take seconds)
// and returns their results in the checks' order. progress, if set, is
// called as each finishes.
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
				timeout = 10 * time.Second
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r := c.Run(cctx)
			if r.Name == "" {
				r.Name = c.Name
			}
			results[i] = r
			if progress != nil {
				mu.Lock()
				progress(r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

// Write renders results as an aligned list with the fixes beneath.
func Write(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(string(r.Status)), r.Name, r.Detail)
		if r.Fix != "" {
			fmt.Fprintf(tw, "\t\t→ %s\n", r.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	counts := map[Status]int{}
	for _, r := range results {
		counts[r.Status]++
	}
	_, err := fmt.Fprintf(w, "\n%d ok, %d warnings, %d missing, %d failing, %d skipped\n",
		counts[OK], counts[Warn], counts[Missing], counts[Fail], counts[Skip])
	return err
}
