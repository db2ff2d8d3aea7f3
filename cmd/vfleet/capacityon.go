package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vfleet/vfleet/internal/capacity"
	"github.com/vfleet/vfleet/internal/remoterun"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
)

// capacityOutput is the file, in the remote search's scratch directory,
// its --json goes to.
const capacityOutput = "capacity.json"

// errNoSearch says a machine's vfleet ended without a search to bring
// back.
var errNoSearch = errors.New("no search came back")

// capacityOn runs the search on each machine of --on; each size's runs
// and the search come back into the local store, where the search names
// the runs by their local ids.
func capacityOn(g *globalOptions, ref string, f capacityFlags, on *onFlags) error {
	targets, err := on.prepare(ref)
	if err != nil {
		return err
	}
	// The SLOs are read here against the scenario, so that a mistake is
	// said before any machine is reached; what only a machine can tell
	// (its CPUs and memory, so its limits) it checks itself.
	spec, slos, group, err := capacitySLOs(ref, f, session.ElsewhereOptions())
	if err != nil {
		return usageError{err}
	}
	if err := checkCapacityOutputs(g, f); err != nil {
		return err
	}
	wk, err := g.begin(workOptions{plain: true})
	if err != nil {
		return err
	}
	defer wk.end()
	st, ctx := wk.st, wk.ctx

	opts := on.options(g, st, ref)
	opts.Command = []string{"capacity", "--html", "-", "--json", capacityOutput,
		"--confidence", strconv.FormatFloat(f.confidence, 'g', -1, 64)}
	if f.maxGiven {
		opts.Command = append(opts.Command, "--max", strconv.Itoa(f.max))
	}
	for _, s := range f.slos {
		opts.Command = append(opts.Command, "--slo", s)
	}
	opts.Output = capacityOutput
	opts.Runs = func(output []byte) []string {
		rec, err := decodeSearch(output)
		if err != nil {
			// All the runs come back all the same; importSearch says why the
			// search does not.
			return nil
		}
		var refs []string
		for _, id := range searchRuns(rec.Result) {
			refs = append(refs, strconv.FormatInt(id, 10))
		}
		return refs
	}
	results := on.each(ctx, targets, opts)

	rctx := context.WithoutCancel(ctx)
	searches := make([]*capacityRecord, len(results))
	for i, r := range results {
		if r.Err != nil {
			continue
		}
		rec, err := importSearch(rctx, st, r)
		if err != nil {
			results[i].Err = fmt.Errorf("%s: %w", r.Target.Name(), err)
			continue
		}
		rec.Scenario, rec.Group, rec.SLOs = spec.Name, group.Name, f.slos
		rec.Headline = rec.Result.Headline(slos)
		searches[i] = rec
	}
	many := len(targets) > 1
	for i, rec := range searches {
		if rec == nil {
			continue
		}
		run, err := st.GetRun(rctx, results[i].Runs[0])
		if err != nil {
			return err
		}
		if many {
			fmt.Printf("%s\n\n", results[i].Target.Name())
		}
		if err := showCapacity(g, *rec, slos, f, many, run.Host); err != nil {
			return err
		}
		fmt.Println()
	}
	printSearches(os.Stdout, results, searches)
	return capacityOnOutcome(results, searches, ctx.Err())
}

func decodeSearch(output []byte) (capacityRecord, error) {
	var rec capacityRecord
	if output == nil {
		return rec, errNoSearch
	}
	if err := json.Unmarshal(output, &rec); err != nil {
		return rec, fmt.Errorf("read the search: %w", err)
	}
	if rec.Result == nil {
		return rec, fmt.Errorf("read the search: %w: it has no result", errNoSearch)
	}
	return rec, nil
}

// searchRuns are the runs a search names, each once, in id order.
func searchRuns(res *capacity.Result) []int64 {
	ids := slices.Clone(res.Reference)
	for _, p := range res.Points {
		ids = append(ids, p.Measurements...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// renumber makes the search name its runs by the ids they have here:
// local[i] is the run the machine numbered searchRuns(res)[i].
func renumber(res *capacity.Result, local []int64) error {
	remote := searchRuns(res)
	if len(remote) != len(local) {
		return fmt.Errorf("the search names %d runs, %d came back", len(remote), len(local))
	}
	to := make(map[int64]int64, len(remote))
	for i, id := range remote {
		to[id] = local[i]
	}
	for i, id := range res.Reference {
		res.Reference[i] = to[id]
	}
	for _, p := range res.Points {
		for i, id := range p.Measurements {
			p.Measurements[i] = to[id]
		}
	}
	return nil
}

// importSearch stores the search a machine brought back, naming the runs
// it brought back with it.
func importSearch(ctx context.Context, st *store.Store, r remoterun.Result) (*capacityRecord, error) {
	rec, err := decodeSearch(r.Output)
	if err != nil {
		if r.Exit > 0 {
			return nil, fmt.Errorf("%w: its vfleet exited %d (its last lines above say why)", err, r.Exit)
		}
		return nil, err
	}
	if err := renumber(rec.Result, r.Runs); err != nil {
		return nil, err
	}
	// The search's machine and time are its runs'.
	var first, last store.Run
	for i, id := range r.Runs {
		run, err := st.GetRun(ctx, id)
		if err != nil {
			return nil, err
		}
		if i == 0 || run.Started.Before(first.Started) {
			first = run
		}
		if i == 0 || run.Finished.After(last.Finished) {
			last = run
		}
	}
	if err := storeSearch(ctx, st, &rec, first.ScenarioHash, first.Host, first.Started, last.Finished); err != nil {
		return nil, err
	}
	return &rec, nil
}

// printSearches is the summary: each machine, its search here and its
// answer, or why it has none.
func printSearches(w io.Writer, results []remoterun.Result, searches []*capacityRecord) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tRESULT\tSEARCH\tOUTCOME\tANSWER\tRUNS\tTOOK\tWHY")
	for i, r := range results {
		result, search, outcome, answer, why := "ok", "—", "—", "—", ""
		if rec := searches[i]; rec != nil {
			search, outcome, answer = fmt.Sprint(rec.ID), string(rec.Result.Outcome), fmt.Sprint(rec.Result.Answer)
		} else {
			result = "FAILED"
			if r.Err != nil {
				why = oneLine(r.Err.Error())
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Target.Name(), result, search, outcome, answer, len(r.Runs), r.Took.Round(time.Second), why)
	}
	tw.Flush()
}

// capacityOnOutcome is the exit status of `capacity --on`: 130 when
// interrupted, 1 when a machine failed (no search came back), else the
// status of the first machine, in --on's order, whose search has no
// answer (4, 5 or 6), 0 when every machine has one.
func capacityOnOutcome(results []remoterun.Result, searches []*capacityRecord, interruptedBy error) error {
	var failed []string
	for i, r := range results {
		if searches[i] == nil {
			failed = append(failed, r.Target.Name())
		}
	}
	switch {
	case interruptedBy != nil:
		return exitError{exitInterrupted, errors.New("interrupted; the sizes the machines measured so far are kept as runs, their searches are not stored")}
	case len(failed) > 0:
		return fmt.Errorf("%d of %d machines failed: %s (see the summary above)", len(failed), len(results), strings.Join(failed, ", "))
	}
	for i, rec := range searches {
		if err := capacityOutcome(rec.Result); err != nil {
			var ee exitError
			if errors.As(err, &ee) {
				return exitError{ee.code, fmt.Errorf("%s: %w", results[i].Target.Name(), ee.error)}
			}
			return err
		}
	}
	return nil
}
