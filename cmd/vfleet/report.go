package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/internal/workload"
)

func newRunsCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "runs",
		Short: "List the stored runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			runs, err := st.ListRuns(cmd.Context())
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				fmt.Fprintf(os.Stderr, "no runs stored in %s yet; start one with 'vfleet run'\n", g.db())
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCENARIO\tSTARTED\tDURATION\tSTATUS\tSAMPLES\tFAILURES\tORIGIN\tWHY")
			for _, r := range runs {
				dur := "—"
				if !r.Finished.IsZero() {
					dur = r.Finished.Sub(r.Started).Round(time.Second).String()
				}
				origin := r.Origin
				if origin == "" {
					origin = "here"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.ID, termtext.Safe(r.ScenarioName), r.Started.Local().Format("2006-01-02 15:04:05"),
					dur, r.Status, r.Samples, r.Failures, termtext.Safe(workload.Clip(origin)), termtext.Safe(workload.Clip(r.StatusReason)))
			}
			return tw.Flush()
		},
	}
}

func newReportCommand(g *globalOptions) *cobra.Command {
	var format, output, machine string
	var across, series bool
	cmd := &cobra.Command{
		Use:   "report RUN | --across RUN RUN... | --series SCENARIO",
		Short: "Render a stored run again, runs of one scenario on several machines (--across), or over time (--series)",
		Long: `Render a stored run again (RUN: an id from 'vfleet runs', or latest).

--across RUN RUN...: the same scenario on several machines side by side, each machine's
groups against its own baseline, with their absolute figures. Runs of different scenarios
are refused; a scenario whose text changed between the runs is warned about.

--series SCENARIO: the complete runs of SCENARIO on this machine (or on --machine, a host
name) in start order, each headline metric's mean per group in every run, with the runs
where it changed level (E-divisive means; docs/many-machines.md).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := report.ParseFormat(format)
			if err != nil {
				return usageError{err}
			}
			if err := checkReportArgs(args, across, series, machine, f); err != nil {
				return usageError{err}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			return g.writeOutput(output, func(w io.Writer) error {
				switch {
				case across:
					return renderAcross(cmd.Context(), st, args, f, w)
				case series:
					return renderSeries(cmd.Context(), st, args[0], machine, f, w)
				}
				id, err := st.ResolveRun(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return render(cmd.Context(), st, id, f, w)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "table, html, json or csv (--series: table, html or json)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().BoolVar(&across, "across", false, "set runs of one scenario on several machines side by side")
	cmd.Flags().BoolVar(&series, "series", false, "show a scenario's runs on one machine over time, with change points")
	cmd.Flags().StringVar(&machine, "machine", "", "with --series: the host name of the machine (default: this one)")
	return cmd
}

// checkReportArgs refuses what report's flags and arguments parse but do
// not mean together.
func checkReportArgs(args []string, across, series bool, machine string, f report.Format) error {
	switch {
	case across && series:
		return errors.New("--across and --series: give one of them")
	case machine != "" && !series:
		return fmt.Errorf("--machine %s: only --series takes a machine", machine)
	case across && len(args) < 2:
		return fmt.Errorf("--across with %d run(s): give at least two runs, one per machine", len(args))
	case series && len(args) != 1:
		return fmt.Errorf("--series with %d argument(s): give one scenario name", len(args))
	case series && f == report.FormatCSV:
		return errors.New("--series --format csv: a series is written as table, html or json")
	case !across && !series && len(args) != 1:
		return fmt.Errorf("report takes one run, %d given (set several side by side with --across)", len(args))
	}
	return nil
}

// openExistingStore opens the results database without creating one, so a
// mistyped --db is an error rather than a new empty database.
func openExistingStore(g *globalOptions) (*store.Store, error) {
	if _, err := os.Stat(g.db()); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no results database at %s (run 'vfleet run' first, or pass --db)", g.db())
		}
		return nil, err
	}
	return store.OpenReadOnly(g.db())
}

// loadComparison reads a stored run and arranges it for reading.
func loadComparison(ctx context.Context, st *store.Store, id int64) (report.Comparison, []store.Sample, error) {
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return report.Comparison{}, nil, err
	}
	samples, err := st.Samples(ctx, id)
	if err != nil {
		return report.Comparison{}, nil, err
	}
	failures, err := st.Failures(ctx, id)
	if err != nil {
		return report.Comparison{}, nil, err
	}
	c := report.Build(run, samples, failures)
	if c.Audit, err = loadAudit(ctx, st, run); err != nil {
		return report.Comparison{}, nil, err
	}
	if c.Load, err = readHostLoad(ctx, st, id); err != nil {
		return report.Comparison{}, nil, err
	}
	return c, samples, nil
}

// readHostLoad is what a run's host did besides it during its steps.
func readHostLoad(ctx context.Context, st *store.Store, id int64) (*report.HostLoad, error) {
	steps, err := st.StepLoads(ctx, id)
	if err != nil {
		return nil, err
	}
	load := report.SummarizeLoad(steps)
	return &load, nil
}

func render(ctx context.Context, st *store.Store, id int64, f report.Format, w io.Writer) error {
	c, samples, err := loadComparison(ctx, st, id)
	if err != nil {
		return err
	}
	switch f {
	case report.FormatHTML:
		return report.WriteHTML(w, c, samples)
	case report.FormatJSON:
		return report.WriteJSON(w, c, samples)
	case report.FormatCSV:
		return report.WriteCSV(w, samples)
	default:
		return report.WriteTable(w, c, tableOptions(w))
	}
}

// loadAudit reads a run's isolation audit; nil for a run without one.
func loadAudit(ctx context.Context, st *store.Store, run store.Run) (*audit.Report, error) {
	recs, err := st.Audits(ctx, run.ID)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	rep, err := audit.Summarize(recs, run.Guests)
	return &rep, err
}

// printRun prints a finished run's table and writes its HTML report.
func printRun(ctx context.Context, g *globalOptions, st *store.Store, id int64, htmlPath string) error {
	if err := render(ctx, st, id, report.FormatTable, os.Stdout); err != nil {
		return err
	}
	if htmlPath == "-" {
		return nil
	}
	if htmlPath == "" {
		htmlPath = fmt.Sprintf("vfleet-run-%d.html", id)
	}
	if err := g.writeOutput(htmlPath, func(w io.Writer) error { return render(ctx, st, id, report.FormatHTML, w) }); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	fmt.Fprintf(os.Stderr, "HTML report: %s\n", htmlPath)
	return nil
}
