package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/remoterun"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
)

const defaultScenario = "default"

// errABUplink refuses an A/B run on a dedicated NIC.
var errABUplink = errors.New("--ab: a dedicated NIC (network.uplink) serves one run at a time, and both runs of an A/B run are set up at once; run the scenarios one after the other and compare the runs with 'vfleet compare'")

func newRunCommand(g *globalOptions) *cobra.Command {
	var htmlPath string
	var ab bool
	var obs observeFlags
	var base baselineFlags
	var on onFlags
	var stopOnEOF bool
	cmd := &cobra.Command{
		Use:   "run [SCENARIO] [--baseline] | run --ab SCENARIO_A SCENARIO_B | run --on ssh://USER@HOST[,...] [SCENARIO]",
		Short: "Run a scenario (a YAML file or a built-in name; default: " + defaultScenario + ")",
		Long: `Run a scenario: start its guests, run every workload in each, store every sample
and print the comparison against the baseline. SCENARIO is a path to a YAML file or
the name of a built-in scenario ('vfleet scenarios' lists them). An HTML report is
written next to the results.

With --ab, two scenarios run as two runs at once, step by step in alternating order
(A then B, then B then A, ...), so that drift of the machine cannot pass for a
difference between them; while a metric of a workload is undecided between them, both
measure it again, up to --max-repetitions; the A/B comparison is printed at the end.

With --baseline, the run is compared with its scenario's baseline on this machine
('vfleet baseline set'), and while a metric of a workload is undecided (neither a change
nor the same within the noise floor), the workload is measured again, up to
--max-repetitions. Exit status as 'vfleet compare --baseline': 0 when every metric is the
same or better, 8 when something got worse, 9 when something is undecided.

With --set-baseline, the run becomes its scenario's baseline on this machine once it is
complete; while a metric of a workload is too little repeated, at the noise measured, for a
run of --max-repetitions to be decided against it, the workload is measured again (up to
--max-repetitions), and what is still too little repeated at the end is named.

With --on, the scenario runs on each machine named (over SSH: keys from the SSH agent or
--on-identity, host keys checked against known_hosts, never a password) instead of this
one: vfleet copies its static binaries for the machine's architecture there, pushes the
guest image from this machine's cache (or lets the machine build it: --image), runs the
scenario there and brings the run back into this machine's results, marked with the
machine. Machines run one after another, or at once with --parallel; one that fails does
not stop the others, and the summary says which failed and why. 'vfleet clean --on'
removes what a killed run left on a machine (docs/many-machines.md).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case ab && len(args) != 2:
				return usageError{fmt.Errorf("--ab takes exactly two scenarios, got %d", len(args))}
			case !ab && len(args) > 1:
				return usageError{fmt.Errorf("run takes one scenario (or two with --ab), got %d", len(args))}
			case ab && len(on.urls) > 0:
				return usageError{errors.New("--ab and --on do not go together: run each scenario --on the machines")}
			case len(on.urls) > 0 && (obs.metricsAddr != "" || obs.otlpEndpoint != ""):
				return usageError{errors.New("--metrics-addr and --otlp-endpoint observe a run on this machine: not with --on")}
			case len(args) == 0:
				args = []string{defaultScenario}
			}
			if err := on.checkAlone(); err != nil {
				return err
			}
			if err := base.check(cmd.Flags(), ab); err != nil {
				return usageError{err}
			}
			if len(on.urls) > 0 {
				if base.on {
					return usageError{errors.New("--baseline compares a run of this machine: run it on the machine itself, or import its run and use 'vfleet compare --baseline'")}
				}
				if base.set {
					return usageError{errors.New("--set-baseline sets a baseline of this machine: run it on the machine itself, or import its run and use 'vfleet baseline set'")}
				}
				return runOn(g, args[0], htmlPath, &on)
			}
			var eof io.Reader
			if stopOnEOF {
				eof = os.Stdin
			}
			return runScenarios(g, args, htmlPath, &obs, nil, &base, eof)
		},
	}
	cmd.Flags().StringVar(&htmlPath, "html", "", "where to write the HTML report (default ./vfleet-run-ID.html; \"-\" for none)")
	cmd.Flags().BoolVar(&ab, "ab", false, "run two scenarios interleaved and compare them")
	obs.register(cmd.Flags())
	base.register(cmd.Flags())
	on.register(cmd.Flags(), "run the scenario on these machines instead of this one", true)
	// How vfleet on one machine stops the run it started on another.
	cmd.Flags().BoolVar(&stopOnEOF, remoterun.StopOnEOFFlag, false, "stop the run as Ctrl-C does when standard input ends")
	cmd.Flags().MarkHidden(remoterun.StopOnEOFFlag)
	return cmd
}

// runScenarios runs the scenarios and prints their reports; with an
// audit, it only starts the guests, audits them and prints that; with
// base on, it compares the run with its baseline; two scenarios are an
// A/B run, compared at base's options (the defaults when base is nil).
// A run ends as after Ctrl-C when eof, if not nil, ends.
func runScenarios(g *globalOptions, refs []string, htmlPath string, obs *observeFlags, auditOnly *auditOptions, base *baselineFlags, eof io.Reader) error {
	began := time.Now()
	var specs []*scenario.Spec
	for _, ref := range refs {
		spec, err := scenario.Load(ref, session.ScenarioOptions(g.stateDir))
		if err != nil {
			return usageError{err}
		}
		specs = append(specs, spec)
	}
	if len(specs) == 2 && (specs[0].Network != nil && specs[0].Network.Uplink != "" || specs[1].Network != nil && specs[1].Network.Uplink != "") {
		// Both runs of an A/B run are set up at once, and a NIC can be
		// lent to one of them only.
		return usageError{errABUplink}
	}
	// A report that cannot be written is known now, not after the run.
	if err := g.checkHTMLPath(htmlPath); err != nil {
		return usageError{err}
	}
	if err := requireRoot("vfleet run"); err != nil {
		return err
	}
	wk, err := g.begin(workOptions{eof: eof})
	if err != nil {
		return err
	}
	defer wk.end()
	st, progress, ctx := wk.st, wk.progress, wk.ctx

	sess, err := session.Prepare(ctx, g.session(progress), specs...)
	if err != nil {
		return err
	}
	opts := sess.Options(ctx, st)
	opts.AuditOnly = auditOnly != nil
	opts.Attack = auditOnly != nil && auditOnly.attack
	compareOpts := report.DefaultCompareOptions
	if base != nil {
		compareOpts = base.opts
	}
	var check *baselineCheck
	if base != nil && base.on {
		if check, err = base.prepare(ctx, st, specs[0].Name, opts.Host); err != nil {
			return err
		}
		opts.MoreRounds = check.moreRounds
	}
	var maker *baselineMaker
	if base != nil && base.set {
		maker = &baselineMaker{st: st, opts: base.opts, workloads: workloadsOf(specs[0].Expand())}
		opts.MoreRounds = maker.moreRounds
	}
	ab := &abCheck{st: st, opts: compareOpts}
	if len(specs) == 2 && !opts.AuditOnly {
		opts.MoreRoundsAB = ab.moreRounds
	}
	observer, stopObserving, err := obs.start(ctx, progress.Logf)
	if err != nil {
		return err
	}
	// Deferred, so the trace is flushed after an interrupted run too.
	defer stopObserving()
	opts.Observer = observer
	var ids []int64
	var runErr error
	if len(specs) == 2 {
		a, b := specs[0].Expand(), specs[1].Expand()
		progress.Logf("A/B: %s (%d steps) against %s (%d steps), interleaved; results in %s", specs[0].Name, len(a.Steps), specs[1].Name, len(b.Steps), g.db())
		var pair [2]int64
		pair, runErr = runner.RunAB(ctx, a, b, opts)
		ids = pair[:]
	} else {
		plan := specs[0].Expand()
		progress.Logf("scenario %s: %d guests, %d steps; results in %s", specs[0].Name, len(plan.Guests), len(plan.Steps), g.db())
		var id int64
		id, runErr = runner.Run(ctx, plan, opts)
		ids = []int64{id}
	}
	progress.Done()
	// Reports are printed even for an interrupted run: what was measured is
	// kept and worth seeing.
	rctx := context.WithoutCancel(ctx)
	for i, id := range ids {
		if id == 0 {
			continue
		}
		if auditOnly != nil {
			if err := auditOnly.print(rctx, g, st, id); err != nil {
				return err
			}
			continue
		}
		path := htmlPath
		if len(ids) > 1 && path != "" && path != "-" {
			path = fmt.Sprintf("%s-%c.html", strings.TrimSuffix(path, ".html"), 'A'+i)
		}
		if err := printRun(rctx, g, st, id, path); err != nil {
			return err
		}
	}
	if len(ids) == 2 && ids[0] != 0 && ids[1] != 0 {
		if ab.err != nil {
			fmt.Fprintf(os.Stderr, "vfleet: warning: %v; no rounds were added after it\n", ab.err)
		}
		if _, err := printComparison(rctx, st, ids[0], ids[1], compareOpts); err != nil {
			return err
		}
	}
	var outcome error
	if check != nil && ids[0] != 0 {
		outcome = check.finish(rctx, ids[0])
	}
	if maker != nil && ids[0] != 0 && runErr == nil {
		outcome = maker.finish(rctx, ids[0])
	}
	fmt.Fprintf(os.Stderr, "finished in %s\n", time.Since(began).Round(time.Second))
	// A run that did not measure everything says so first: its comparison
	// lacks what it did not measure.
	if err := runOutcome(rctx, st, ids, runErr); err != nil {
		return err
	}
	return outcome
}

// runOutcome turns how the runs ended into the command's error and exit
// status: 0 only when every step of every run was measured.
func runOutcome(ctx context.Context, st *store.Store, ids []int64, runErr error) error {
	if runErr != nil {
		if interrupted(runErr) && !errors.Is(runErr, runner.ErrStore) {
			return exitError{exitInterrupted, errors.New("interrupted; the samples measured so far are kept (status incomplete)")}
		}
		return runErr
	}
	for _, id := range ids {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			return err
		}
		if r.Status == store.StatusCompleteWithFailures {
			return exitError{exitStepsFailed, fmt.Errorf("run %d finished with failures: %s (see its failures above)", id, r.StatusReason)}
		}
	}
	return nil
}

// checkHTMLPath fails when the report of `vfleet run` could not be written
// where asked.
func (g *globalOptions) checkHTMLPath(path string) error { return g.checkOutputPath("--html", path) }
