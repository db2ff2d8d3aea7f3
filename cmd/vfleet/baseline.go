package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
)

func newBaselineCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "Name the run a scenario's later runs are compared with ('compare --baseline')",
		Long: `A baseline is a complete run that later runs of its scenario on the same machine are
compared with by 'vfleet compare --baseline' (and 'vfleet run --baseline'), which exits
non-zero when something got worse. There is one per scenario name and machine (the host
name, architecture, CPU model and machine-id the run recorded); setting another replaces it.`,
	}
	var machine string
	unset := &cobra.Command{
		Use:   "unset SCENARIO",
		Short: "Forget the baseline of a scenario on this machine (or --machine); its run stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStoreToWrite(g)
			if err != nil {
				return err
			}
			defer st.Close()
			if machine == "" {
				machine, err = thisMachinesBaseline(cmd.Context(), st, args[0])
			} else {
				machine, err = namedBaseline(cmd.Context(), st, args[0], machine)
			}
			if err != nil {
				return err
			}
			if err := st.UnsetBaseline(cmd.Context(), args[0], machine); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("scenario %s has no baseline on %s ('vfleet baseline show' lists them)", args[0], machine)
				}
				return err
			}
			fmt.Fprintf(os.Stderr, "scenario %s has no baseline on %s any more\n", args[0], machine)
			return nil
		},
	}
	unset.Flags().StringVar(&machine, "machine", "", "the machine whose baseline to forget: its host name, or its whole name as 'baseline show' gives it (default: this one)")
	cmd.AddCommand(&cobra.Command{
		Use:   "set RUN",
		Short: "Make a complete run (an id from 'vfleet runs', or latest) the baseline of its scenario on its machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStoreToWrite(g)
			if err != nil {
				return err
			}
			defer st.Close()
			id, err := st.ResolveRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return setBaseline(cmd.Context(), st, id, report.DefaultCompareOptions)
		},
	}, &cobra.Command{
		Use:   "show [SCENARIO]",
		Short: "List the baselines set, of every scenario or of one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scenario := ""
			if len(args) == 1 {
				scenario = args[0]
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			all, err := st.Baselines(cmd.Context(), scenario)
			if err != nil {
				return err
			}
			if len(all) == 0 {
				what := "no scenario has a baseline"
				if scenario != "" {
					what = "scenario " + scenario + " has no baseline"
				}
				fmt.Fprintf(os.Stderr, "%s; set one with 'vfleet baseline set RUN'\n", what)
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SCENARIO\tMACHINE\tRUN\tSET")
			for _, b := range all {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", termtext.Safe(b.ScenarioName), termtext.Safe(b.Machine), b.RunID, b.Set.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}, unset)
	return cmd
}

// setBaseline makes run id its scenario's baseline on its machine and says
// which of its metrics are too little repeated to be decided against.
func setBaseline(ctx context.Context, st *store.Store, id int64, opts report.CompareOptions) error {
	b, err := st.SetBaseline(ctx, id, time.Now())
	if err != nil {
		if errors.Is(err, store.ErrNotComplete) {
			return fmt.Errorf("%w: a baseline must be a complete run, one that measured every step", err)
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "run %d is the baseline of scenario %s on %s\n", b.RunID, termtext.Safe(b.ScenarioName), termtext.Safe(b.Machine))
	samples, err := st.Samples(ctx, b.RunID)
	if err != nil {
		return err
	}
	return warnShortfalls(b.RunID, samples, opts)
}

// openStoreToWrite opens the results database to write, without creating
// one: a baseline names a run already stored.
func openStoreToWrite(g *globalOptions) (*store.Store, error) {
	if _, err := os.Stat(g.db()); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no results database at %s: a baseline is a stored run (run 'vfleet run' first, or pass --db)", g.db())
	}
	return store.Open(g.db())
}

// thisMachinesBaseline is the name the baseline of scenario on this
// machine is stored under, which a baseline set before machines were
// named by more than their host name is too; this machine's own name when
// it has none, for the message.
func thisMachinesBaseline(ctx context.Context, st *store.Store, scenario string) (string, error) {
	fp, err := hostinfo.Collect(hostinfo.Options{})
	if err != nil {
		return "", fmt.Errorf("fingerprint this machine: %w", err)
	}
	b, err := st.GetBaseline(ctx, scenario, fp)
	if errors.Is(err, store.ErrNotFound) {
		return fp.Machine(), nil
	}
	return b.Machine, err
}

// namedBaseline is the name the baseline of scenario on the machine name
// names (hostinfo.MachineNamed) is stored under; name itself when none
// is, for the message.
func namedBaseline(ctx context.Context, st *store.Store, scenario, name string) (string, error) {
	bs, err := st.Baselines(ctx, scenario)
	if err != nil {
		return "", err
	}
	var named []string
	for _, b := range bs {
		if hostinfo.MachineNamed(b.Machine, name) {
			named = append(named, b.Machine)
		}
	}
	switch len(named) {
	case 0:
		return name, nil
	case 1:
		return named[0], nil
	}
	return "", fmt.Errorf("--machine %s names more than one machine with a baseline of scenario %s (%s): give the whole name", name, scenario, strings.Join(named, "; "))
}

// baselineFlags are `vfleet run --baseline`'s and `--set-baseline`'s:
// compare the run with its scenario's baseline, measuring more rounds
// while a metric is undecided; or measure the run until it can be the
// baseline, and set it.
type baselineFlags struct {
	on, set bool
	opts    report.CompareOptions
}

func (f *baselineFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.on, "baseline", false, "compare the run with its scenario's baseline on this machine, adding repetitions while a metric is undecided; exit 8 when worse, 9 when undecided")
	fs.BoolVar(&f.set, "set-baseline", false, "make the run its scenario's baseline on this machine, adding repetitions while a metric is too little repeated at its noise for a run of --max-repetitions to be decided against it")
	f.opts = report.DefaultCompareOptions
	registerCompareOptions(fs, &f.opts, "with --baseline, --set-baseline or --ab: ")
}

// check refuses what the flags parse but cannot mean.
func (f *baselineFlags) check(fs *pflag.FlagSet, ab bool) error {
	switch {
	case f.on && ab:
		return errors.New("--baseline compares one run with its baseline; --ab compares two scenarios: use one or the other")
	case f.set && ab:
		return errors.New("--set-baseline makes one run the baseline; --ab compares two scenarios: use one or the other")
	case f.set && f.on:
		return errors.New("--set-baseline makes the run the baseline, --baseline compares it with the one set: use one or the other")
	}
	if !f.on && !f.set && !ab {
		for _, flag := range []string{"max-repetitions", "alpha", "noise-floor"} {
			if fs.Changed(flag) {
				return fmt.Errorf("--%s is for a comparison: give --baseline, --set-baseline or --ab too", flag)
			}
		}
	}
	return checkCompareOptions(f.opts)
}

// baselineCheck compares a run being measured with its scenario's
// baseline, as `compare --baseline` does once it is done.
type baselineCheck struct {
	st      *store.Store
	base    store.Baseline
	run     store.Run
	samples []store.Sample
	opts    report.CompareOptions
	// err is the first error reading the run's samples while it runs: the
	// run goes on without more rounds, and its end says what went wrong
	// before comparing what it measured.
	err error
}

// prepare finds the baseline of the scenario on the machine host is
// before anything is measured, so that a missing one is known at once.
func (f *baselineFlags) prepare(ctx context.Context, st *store.Store, scenario string, host hostinfo.Fingerprint) (*baselineCheck, error) {
	b, err := st.GetBaseline(ctx, scenario, host)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("scenario %s has no baseline on %s: run it, then set one with 'vfleet baseline set RUN' (%w)", scenario, host.Machine(), err)
	}
	if err != nil {
		return nil, err
	}
	opts := f.opts
	opts.Baseline = true
	c := &baselineCheck{st: st, base: b, opts: opts}
	if c.run, err = st.GetRun(ctx, b.RunID); err != nil {
		return nil, err
	}
	if c.samples, err = st.Samples(ctx, b.RunID); err != nil {
		return nil, err
	}
	return c, warnShortfalls(b.RunID, c.samples, opts)
}

// warnShortfalls says which metrics of a baseline are too little repeated
// at their noise for a run of opts.MaxRepetitions to be decided against:
// they would end undecided however long the run measures, and only a
// baseline of more repetitions helps.
func warnShortfalls(id int64, samples []store.Sample, opts report.CompareOptions) error {
	short, metrics := report.BaselineShortfalls(samples, opts)
	if len(short) == 0 {
		return nil
	}
	fmt.Fprint(os.Stderr, "vfleet: warning: ")
	return report.WriteShortfalls(os.Stderr, id, metrics, short, opts)
}

// moreRounds is the runner's Options.MoreRounds: another round of a
// workload while one of its metrics is undecided against the baseline
// and could be decided: the whole run so far is compared, as its
// comparison will be at the end, so that the same looks decide both.
func (c *baselineCheck) moreRounds(ctx context.Context, runID int64, workloadID string, done int) string {
	if done >= c.opts.MaxRepetitions || c.err != nil {
		return ""
	}
	samples, err := c.st.Samples(ctx, runID)
	if err != nil {
		c.err = fmt.Errorf("read run %d's samples to compare with its baseline: %w", runID, err)
		return ""
	}
	undecided := undecidedIn(report.CompareRuns(c.run, c.samples, store.Run{ID: runID}, samples, c.opts), workloadID)
	if undecided == 0 {
		return ""
	}
	return fmt.Sprintf("%d of its metrics undecided against baseline run %d", undecided, c.base.RunID)
}

// finish prints the run's comparison with the baseline and returns its
// outcome, as `compare --baseline` would: a failed read while the run
// went on cost it its added rounds, not its comparison.
func (c *baselineCheck) finish(ctx context.Context, id int64) error {
	if c.err != nil {
		fmt.Fprintf(os.Stderr, "vfleet: warning: %v; no rounds were added after it\n", c.err)
	}
	fmt.Fprintln(os.Stderr, againstBaseline(id, c.base))
	cmp, err := printComparison(ctx, c.st, c.base.RunID, id, c.opts)
	if err != nil {
		return err
	}
	if w := scenarioWarning(cmp.A, cmp.B); w != "" {
		fmt.Fprintln(os.Stderr, "vfleet: warning:", w)
	}
	return baselineOutcome(cmp)
}

// baselineMaker measures a run until it can be its scenario's baseline,
// then sets it (`vfleet run --set-baseline`): against a baseline of n
// repetitions no number of new ones resolves a change smaller than the
// baseline's own uncertainty, so the baseline is sized when it is made.
type baselineMaker struct {
	st   *store.Store
	opts report.CompareOptions
	// workloads is how many (group, workload) pairs the run measures:
	// the metrics the baseline will have, against which each is sized,
	// are estimated from those measured so far.
	workloads int
	// err is the first error reading the run's samples while it runs, as
	// baselineCheck's.
	err error
}

// moreRounds is the runner's Options.MoreRounds: another round of a
// workload while one of its metrics needs more repetitions, at the noise
// measured so far, for a run of opts.MaxRepetitions to be decided against
// it. A metric too noisy for any baseline gets none: more would not do.
func (m *baselineMaker) moreRounds(ctx context.Context, runID int64, workloadID string, done int) string {
	if done >= m.opts.MaxRepetitions || m.err != nil {
		return ""
	}
	samples, err := m.st.Samples(ctx, runID)
	if err != nil {
		m.err = fmt.Errorf("read run %d's samples to size it as a baseline: %w", runID, err)
		return ""
	}
	_, metrics := report.BaselineShortfalls(samples, m.opts)
	measured := map[[2]string]bool{}
	for _, s := range samples {
		measured[[2]string{s.Group, s.WorkloadID}] = true
	}
	family := (metrics*m.workloads + len(measured) - 1) / max(len(measured), 1)
	short, _ := report.BaselineShortfallsAmong(samples, m.opts, family)
	n := 0
	for _, s := range short {
		if s.WorkloadID == workloadID && s.Needs > done {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d of its metrics too little repeated to be a baseline", n)
}

// finish sets a complete run as the baseline. One that did not measure
// every step is not set; the run's own outcome says why.
func (m *baselineMaker) finish(ctx context.Context, id int64) error {
	if m.err != nil {
		fmt.Fprintf(os.Stderr, "vfleet: warning: %v; no rounds were added after it\n", m.err)
	}
	err := setBaseline(ctx, m.st, id, m.opts)
	if errors.Is(err, store.ErrNotComplete) {
		fmt.Fprintf(os.Stderr, "vfleet: run %d is not set as the baseline: %v\n", id, err)
		return nil
	}
	return err
}

// workloadsOf counts the (group, workload) pairs a plan measures.
func workloadsOf(p *scenario.Plan) int {
	seen := map[[2]string]bool{}
	for _, st := range p.Steps {
		if !st.Warmup {
			seen[[2]string{st.Group, st.WorkloadID}] = true
		}
	}
	return len(seen)
}
