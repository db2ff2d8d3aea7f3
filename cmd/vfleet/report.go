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
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.ID, r.ScenarioName, r.Started.Local().Format("2006-01-02 15:04:05"),
					dur, r.Status, r.Samples, r.Failures, workload.Clip(origin), workload.Clip(r.StatusReason))
			}
			return tw.Flush()
		},
	}
}

func newReportCommand(g *globalOptions) *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Render a stored run again (RUN: an id from 'vfleet runs', or latest)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := report.ParseFormat(format)
			if err != nil {
				return usageError{err}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			id, err := st.ResolveRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := io.Writer(os.Stdout)
			if output != "" && output != "-" {
				file, err := os.Create(output)
				if err != nil {
					return err
				}
				defer file.Close()
				w = file
			}
			return render(cmd.Context(), st, id, f, w)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "table, html, json or csv")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	return cmd
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

func render(ctx context.Context, st *store.Store, id int64, f report.Format, w io.Writer) error {
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return err
	}
	samples, err := st.Samples(ctx, id)
	if err != nil {
		return err
	}
	failures, err := st.Failures(ctx, id)
	if err != nil {
		return err
	}
	c := report.Build(run, samples, failures)
	if c.Audit, err = loadAudit(ctx, st, run); err != nil {
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
func printRun(ctx context.Context, st *store.Store, id int64, htmlPath string) error {
	if err := render(ctx, st, id, report.FormatTable, os.Stdout); err != nil {
		return err
	}
	if htmlPath == "-" {
		return nil
	}
	if htmlPath == "" {
		htmlPath = fmt.Sprintf("vfleet-run-%d.html", id)
	}
	f, err := os.Create(htmlPath)
	if err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	if err := render(ctx, st, id, report.FormatHTML, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "HTML report: %s\n", htmlPath)
	return nil
}
