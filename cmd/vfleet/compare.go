package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// Exit statuses of `vfleet compare --baseline` (and `vfleet run
// --baseline`) beyond the common ones, for CI jobs.
const (
	// exitWorse: some metric got worse than the baseline's.
	exitWorse = 8
	// exitUndecided: nothing got worse, but some metric is neither
	// better nor the same: its repetitions did not decide it.
	exitUndecided = 9
)

func newCompareCommand(g *globalOptions) *cobra.Command {
	o := report.DefaultCompareOptions
	var format, output string
	var baseline bool
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B | compare --baseline [RUN]",
		Short: "Compare two stored runs metric by metric, with a significance test",
		Long: `Compare run B against run A. Samples are paired by guest group, workload, parameters
and metric; each pair gets the change of the mean with its 95% confidence interval, its
coefficient of variation on each side, and one of four verdicts: better or worse
(significant by a t test on the difference of the means and not within --noise-floor), the same (the change's
interval lies within ±--noise-floor), or undecided (neither yet, with how many repetitions
would likely decide it). The false better/worse of a whole comparison are bounded by
--alpha over all its metrics (Holm) and over every look of repetitions up to
--max-repetitions (group-sequential spending): see docs/results.md.

With --baseline, RUN (default: latest) is compared against the baseline of its scenario on
its machine ('vfleet baseline set'). Exit status: 0 when every metric is the same or better,
8 when some metric got worse, 9 when none did but some metric is undecided.`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case baseline && len(args) > 1:
				return usageError{fmt.Errorf("--baseline takes one run to compare with its baseline, got %d", len(args))}
			case !baseline && len(args) != 2:
				return usageError{fmt.Errorf("compare takes two runs (or one with --baseline), got %d", len(args))}
			}
			if format != "table" && format != "json" && format != "html" {
				return usageError{fmt.Errorf("unknown format %q (allowed: table, json, html)", format)}
			}
			if err := checkCompareOptions(o); err != nil {
				return usageError{err}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			if baseline {
				ref := "latest"
				if len(args) == 1 {
					ref = args[0]
				}
				c, err := compareWithBaseline(cmd.Context(), st, ref, o)
				if err != nil {
					return err
				}
				if err := writeComparison(g, c, format, output); err != nil {
					return err
				}
				return baselineOutcome(c)
			}
			var ids [2]int64
			for i, ref := range args {
				if ids[i], err = st.ResolveRun(cmd.Context(), ref); err != nil {
					return err
				}
			}
			if ids[0] == ids[1] {
				// Resolved first: "latest" may name the other run.
				return usageError{fmt.Errorf("%s and %s are the same run (run %d): compare two different runs", args[0], args[1], ids[0])}
			}
			c, err := compareRuns(cmd.Context(), st, ids[0], ids[1], o)
			if err != nil {
				return err
			}
			if w := scenarioWarning(c.A, c.B); w != "" {
				fmt.Fprintln(os.Stderr, "vfleet: warning:", w)
			}
			return writeComparison(g, c, format, output)
		},
	}
	registerCompareOptions(cmd.Flags(), &o, "")
	cmd.Flags().BoolVar(&baseline, "baseline", false, "compare RUN (default latest) with its scenario's baseline; exit 8 when worse, 9 when undecided")
	cmd.Flags().StringVar(&format, "format", "table", "table, json or html")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

// writeComparison writes c in format to the file output, or to standard
// output.
func writeComparison(g *globalOptions, c report.ABComparison, format, output string) error {
	return g.writeOutput(output, func(w io.Writer) error {
		switch format {
		case "json":
			return report.WriteABJSON(w, c)
		case "html":
			return report.WriteABHTML(w, c)
		}
		color := w == io.Writer(os.Stdout) && isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == ""
		return report.WriteABTable(w, c, report.TableOptions{Color: color})
	})
}

// compareWithBaseline compares the run ref names (as B) with the baseline
// of its scenario on its machine (as A).
func compareWithBaseline(ctx context.Context, st *store.Store, ref string, o report.CompareOptions) (report.ABComparison, error) {
	o.Baseline = true
	id, err := st.ResolveRun(ctx, ref)
	if err != nil {
		return report.ABComparison{}, err
	}
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return report.ABComparison{}, err
	}
	b, err := st.GetBaseline(ctx, run.ScenarioName, run.Host)
	if errors.Is(err, store.ErrNotFound) {
		return report.ABComparison{}, fmt.Errorf("run %d: scenario %s has no baseline on %s: set one with 'vfleet baseline set RUN' (%w)",
			id, run.ScenarioName, run.Host.Machine(), err)
	}
	if err != nil {
		return report.ABComparison{}, err
	}
	if b.RunID == id {
		return report.ABComparison{}, usageError{fmt.Errorf("run %d is the baseline of scenario %s itself: compare a later run", id, run.ScenarioName)}
	}
	c, err := compareRuns(ctx, st, b.RunID, id, o)
	if err != nil {
		return report.ABComparison{}, err
	}
	fmt.Fprintln(os.Stderr, againstBaseline(id, b))
	if w := scenarioWarning(c.A, c.B); w != "" {
		fmt.Fprintln(os.Stderr, "vfleet: warning:", w)
	}
	return c, nil
}

// baselineOutcome is the exit status of a comparison with a baseline: a
// CI job passes only when every metric is the same or better, fails on
// what got worse, and tells apart what was not decided.
func baselineOutcome(c report.ABComparison) error {
	worse, undecided, needs, never := 0, 0, 0, 0
	for _, r := range c.Rows {
		switch r.Verdict {
		case report.VerdictWorse:
			worse++
		case report.VerdictUndecided:
			undecided++
			if r.NeedsRepetitions == 0 {
				never++
			}
			needs = max(needs, r.NeedsRepetitions)
		}
	}
	switch {
	case worse > 0:
		return exitError{exitWorse, fmt.Errorf("run %d: %d of %d metrics got worse than in baseline run %d", c.B.ID, worse, len(c.Rows), c.A.ID)}
	case never > 0:
		return exitError{exitUndecided, fmt.Errorf("run %d: nothing got worse than in baseline run %d, but %d of %d metrics are undecided, %d of them because the baseline's repetitions are too few at its noise (set a baseline of more repetitions)",
			c.B.ID, c.A.ID, undecided, len(c.Rows), never)}
	case undecided > 0:
		return exitError{exitUndecided, fmt.Errorf("run %d: nothing got worse than in baseline run %d, but %d of %d metrics are undecided (a run of about %d repetitions would likely decide them)",
			c.B.ID, c.A.ID, undecided, len(c.Rows), needs)}
	}
	return nil
}

// registerCompareOptions adds the flags of a comparison; prefix says
// which command's option they are for ("with --baseline: ").
func registerCompareOptions(fs *pflag.FlagSet, o *report.CompareOptions, prefix string) {
	fs.Float64Var(&o.Alpha, "alpha", o.Alpha, prefix+"chance of calling any unchanged metric better or worse, per comparison of all metrics")
	fs.Float64Var(&o.NoiseFloor, "noise-floor", o.NoiseFloor, prefix+"relative change within which a metric is the same (0.05 = 5%)")
	fs.IntVar(&o.MaxRepetitions, "max-repetitions", o.MaxRepetitions, prefix+"the most repetitions a side measured while a metric is undecided, which the looks' levels are planned for")
}

// undecidedIn counts the metrics of a workload more rounds could decide:
// undecided, and not against a baseline too small to resolve the floor.
func undecidedIn(c report.ABComparison, workloadID string) int {
	n := 0
	for _, r := range c.Rows {
		if r.WorkloadID == workloadID && r.Verdict == report.VerdictUndecided && r.NeedsRepetitions > 0 {
			n++
		}
	}
	return n
}

// abCheck is `vfleet run --ab`'s Options.MoreRoundsAB: another round of
// a workload in both runs while one of its metrics is undecided between
// them, compared as the run's comparison will be at the end.
type abCheck struct {
	st   *store.Store
	opts report.CompareOptions
	// err is the first error reading the runs' samples: no more rounds.
	err error
}

func (c *abCheck) moreRounds(ctx context.Context, ids [2]int64, workloadID string, done int) string {
	if done >= c.opts.MaxRepetitions || c.err != nil {
		return ""
	}
	var samples [2][]store.Sample
	for i, id := range ids {
		var err error
		if samples[i], err = c.st.Samples(ctx, id); err != nil {
			c.err = fmt.Errorf("read run %d's samples to compare the A/B runs: %w", id, err)
			return ""
		}
	}
	undecided := undecidedIn(report.CompareRuns(store.Run{ID: ids[0]}, samples[0], store.Run{ID: ids[1]}, samples[1], c.opts), workloadID)
	if undecided == 0 {
		return ""
	}
	return fmt.Sprintf("%d of its metrics undecided between A and B", undecided)
}

// checkCompareOptions refuses what the flags parse but the test cannot
// use. NaN is false under every comparison, so each bound says what is
// allowed rather than what is not.
func checkCompareOptions(o report.CompareOptions) error {
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return fmt.Errorf("--alpha %v: want a number strictly between 0 and 1, such as 0.01", o.Alpha)
	}
	// A floor of 100% or more would hide every fall of a positive metric
	// (none falls by more), and past that its band prints as ±+Inf%.
	if !(o.NoiseFloor >= 0 && o.NoiseFloor < 1) {
		return fmt.Errorf("--noise-floor %v: want a fraction ≥ 0 and below 1 (0.05 = 5%%)", o.NoiseFloor)
	}
	if o.MaxRepetitions < stats.FirstLook || o.MaxRepetitions > maxRepetitionsLimit {
		return fmt.Errorf("--max-repetitions %d: want %d to %d (the first look needs %d a side)", o.MaxRepetitions, stats.FirstLook, maxRepetitionsLimit, stats.FirstLook)
	}
	return nil
}

// maxRepetitionsLimit bounds the looks a comparison plans for: beyond
// it, a run of that many rounds is no longer a regression check.
const maxRepetitionsLimit = 1000

// scenarioWarning says, or returns "", when two runs did not run the same
// scenario: they are still compared, as variants may be on purpose, but a
// change found may come from the scenario rather than the system. `run
// --ab` compares two scenarios by design, so only `compare` warns.
func scenarioWarning(a, b store.Run) string {
	switch {
	case a.ScenarioName != b.ScenarioName:
		return fmt.Sprintf("run %d is of scenario %s and run %d of scenario %s: differences may come from the scenarios, not the system",
			a.ID, a.ScenarioName, b.ID, b.ScenarioName)
	case a.ScenarioHash != b.ScenarioHash:
		return fmt.Sprintf("scenario %s changed between run %d and run %d (its text differs): differences may come from the change, not the system",
			a.ScenarioName, a.ID, b.ID)
	}
	return ""
}

func compareRuns(ctx context.Context, st *store.Store, a, b int64, o report.CompareOptions) (report.ABComparison, error) {
	var runs [2]store.Run
	var samples [2][]store.Sample
	var loads [2]*report.HostLoad
	for i, id := range []int64{a, b} {
		var err error
		if runs[i], err = st.GetRun(ctx, id); err != nil {
			return report.ABComparison{}, err
		}
		if samples[i], err = st.Samples(ctx, id); err != nil {
			return report.ABComparison{}, err
		}
		if loads[i], err = readHostLoad(ctx, st, id); err != nil {
			return report.ABComparison{}, err
		}
	}
	c := report.CompareRuns(runs[0], samples[0], runs[1], samples[1], o)
	c.Loads = loads
	return c, nil
}

// printComparison prints B against A after a run and returns the
// comparison.
func printComparison(ctx context.Context, st *store.Store, a, b int64, o report.CompareOptions) (report.ABComparison, error) {
	c, err := compareRuns(ctx, st, a, b, o)
	if err != nil {
		return report.ABComparison{}, err
	}
	fmt.Fprintln(os.Stdout)
	return c, report.WriteABTable(os.Stdout, c, report.TableOptions{Color: isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == ""})
}

// againstBaseline says which baseline a run is compared with.
func againstBaseline(id int64, b store.Baseline) string {
	return fmt.Sprintf("run %d against the baseline of scenario %s on %s: run %d (set %s)",
		id, b.ScenarioName, b.Machine, b.RunID, b.Set.Local().Format("2006-01-02 15:04:05"))
}
