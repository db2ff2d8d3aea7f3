package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/store"
)

func newCompareCommand(g *globalOptions) *cobra.Command {
	o := report.DefaultCompareOptions
	var format, output string
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B",
		Short: "Compare two stored runs metric by metric, with a significance test",
		Long: `Compare run B against run A. Samples are paired by guest group, workload, parameters
and metric; each pair gets the change of the mean with its 95% confidence interval and the
p-value of an exact (or, for many repetitions, sampled) permutation test. A change counts
only when p < --alpha and it exceeds --noise-floor.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" && format != "html" {
				return usageError{fmt.Errorf("unknown format %q (allowed: table, json, html)", format)}
			}
			if o.Alpha <= 0 || o.Alpha >= 1 || o.NoiseFloor < 0 {
				return usageError{fmt.Errorf("--alpha must be between 0 and 1 and --noise-floor at least 0")}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			var ids [2]int64
			for i, ref := range args {
				if ids[i], err = st.ResolveRun(cmd.Context(), ref); err != nil {
					return err
				}
			}
			c, err := compareRuns(cmd.Context(), st, ids[0], ids[1], o)
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
			switch format {
			case "json":
				err = report.WriteABJSON(w, c)
			case "html":
				err = report.WriteABHTML(w, c)
			default:
				color := w == io.Writer(os.Stdout) && isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == ""
				err = report.WriteABTable(w, c, report.TableOptions{Color: color})
			}
			if err != nil {
				return err
			}
			if f, ok := w.(*os.File); ok && f != os.Stdout {
				// A full disk shows up at close; the page must not be reported written.
				return f.Close()
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&o.Alpha, "alpha", o.Alpha, "significance level of the permutation test")
	cmd.Flags().Float64Var(&o.NoiseFloor, "noise-floor", o.NoiseFloor, "smallest relative change that counts (0.05 = 5%)")
	cmd.Flags().StringVar(&format, "format", "table", "table, json or html")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func compareRuns(ctx context.Context, st *store.Store, a, b int64, o report.CompareOptions) (report.ABComparison, error) {
	var runs [2]store.Run
	var samples [2][]store.Sample
	for i, id := range []int64{a, b} {
		var err error
		if runs[i], err = st.GetRun(ctx, id); err != nil {
			return report.ABComparison{}, err
		}
		if samples[i], err = st.Samples(ctx, id); err != nil {
			return report.ABComparison{}, err
		}
	}
	return report.CompareRuns(runs[0], samples[0], runs[1], samples[1], o), nil
}

// printComparison prints B against A after an A/B run.
func printComparison(ctx context.Context, st *store.Store, a, b int64) error {
	c, err := compareRuns(ctx, st, a, b, report.DefaultCompareOptions)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout)
	return report.WriteABTable(os.Stdout, c, report.TableOptions{Color: isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == ""})
}
