package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// renderAcross sets the runs named by refs side by side, one machine each.
func renderAcross(ctx context.Context, st *store.Store, refs []string, f report.Format, w io.Writer) error {
	seen := map[int64]string{}
	var cs []report.Comparison
	for _, ref := range refs {
		id, err := st.ResolveRun(ctx, ref)
		if err != nil {
			return err
		}
		if first, ok := seen[id]; ok {
			// Resolved first: "latest" may name another argument's run.
			return usageError{fmt.Errorf("%s and %s are the same run (run %d): give each run once", first, ref, id)}
		}
		seen[id] = ref
		c, _, err := loadComparison(ctx, st, id)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	a, err := report.BuildAcross(cs)
	if errors.Is(err, report.ErrMixedScenarios) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	for _, c := range cs[1:] {
		if warning := scenarioWarning(cs[0].Run, c.Run); warning != "" {
			fmt.Fprintln(os.Stderr, "vfleet: warning:", warning)
		}
	}
	switch f {
	case report.FormatHTML:
		return report.WriteAcrossHTML(w, a)
	case report.FormatJSON:
		return report.WriteAcrossJSON(w, a)
	case report.FormatCSV:
		return report.WriteAcrossCSV(w, a)
	}
	return report.WriteAcrossTable(w, a, tableOptions(w))
}

// errNoSeries: no complete run of the scenario on the machine asked for.
var errNoSeries = errors.New("no complete run")

// renderSeries shows the complete runs of scenario on one machine (this
// one, or the host named machine) over time.
func renderSeries(ctx context.Context, st *store.Store, scenario, machine string, f report.Format, w io.Writer) error {
	summaries, err := st.ListRuns(ctx)
	if err != nil {
		return err
	}
	var runs []store.Run
	for _, s := range summaries {
		if s.ScenarioName != scenario || s.Status != store.StatusComplete {
			continue
		}
		run, err := st.GetRun(ctx, s.ID)
		if err != nil {
			return err
		}
		runs = append(runs, run)
	}
	runs, err = machineRuns(runs, machine)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", scenario, err)
	}
	slices.SortStableFunc(runs, func(a, b store.Run) int { return a.Started.Compare(b.Started) })
	samples := make([][]store.Sample, len(runs))
	for i, run := range runs {
		if samples[i], err = st.Samples(ctx, run.ID); err != nil {
			return err
		}
	}
	// Run by run, so each change of the text is told once, where it happened.
	for i := 1; i < len(runs); i++ {
		if warning := scenarioWarning(runs[i-1], runs[i]); warning != "" {
			fmt.Fprintln(os.Stderr, "vfleet: warning:", warning)
		}
	}
	s := report.BuildSeries(runs, samples, stats.DefaultChangePointOptions)
	switch f {
	case report.FormatHTML:
		return report.WriteSeriesHTML(w, s)
	case report.FormatJSON:
		return report.WriteSeriesJSON(w, s)
	}
	return report.WriteSeriesTable(w, s, tableOptions(w))
}

// machineRuns keeps the runs measured on one machine: this one when
// hostname is empty, else the one of that name (its host name, or the
// whole name the messages give), which must then be a single machine
// (hostinfo.Fingerprint.SameMachine).
func machineRuns(runs []store.Run, hostname string) ([]store.Run, error) {
	var want hostinfo.Fingerprint
	if hostname == "" {
		fp, err := hostinfo.Collect(hostinfo.Options{})
		if err != nil {
			return nil, fmt.Errorf("fingerprint this machine: %w", err)
		}
		want = fp
	} else {
		var named []store.Run
		for _, r := range runs {
			if r.Host.Named(hostname) {
				named = append(named, r)
			}
		}
		if len(named) == 0 {
			return nil, fmt.Errorf("%w on a machine named %s (%s)", errNoSeries, hostname, machinesOf(runs))
		}
		want = named[0].Host
		for _, r := range named {
			if !r.Host.SameMachine(want) {
				return nil, fmt.Errorf("%s names more than one machine (%s): their runs are no one series", hostname, machinesOf(named))
			}
		}
	}
	var out []store.Run
	for _, r := range runs {
		if r.Host.SameMachine(want) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w on %s (%s; pick another with --machine)", errNoSeries, want.Machine(), machinesOf(runs))
	}
	return out, nil
}

// machinesOf lists the machines runs were measured on, for a message.
func machinesOf(runs []store.Run) string {
	var names []string
	for _, r := range runs {
		if name := r.Host.Machine(); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "it has no complete run anywhere"
	}
	return "its complete runs are on " + strings.Join(names, "; ")
}
