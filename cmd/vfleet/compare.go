package main

import (
	"context"
	"fmt"
	"io"
	"math"
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
			if err := checkCompareOptions(o); err != nil {
				return usageError{err}
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

// checkCompareOptions refuses what the flags parse but the test cannot
// use. NaN is false under every comparison, so each bound says what is
// allowed rather than what is not.
func checkCompareOptions(o report.CompareOptions) error {
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return fmt.Errorf("--alpha %v: want a number strictly between 0 and 1, such as 0.01", o.Alpha)
	}
	if math.IsNaN(o.NoiseFloor) || math.IsInf(o.NoiseFloor, 0) || o.NoiseFloor < 0 {
		return fmt.Errorf("--noise-floor %v: want a finite number ≥ 0, a fraction (0.05 = 5%%)", o.NoiseFloor)
	}
	return nil
}

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
