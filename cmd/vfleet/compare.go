package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/report"
)

func newCompareCommand(g *globalOptions) *cobra.Command {
	o := report.DefaultCompareOptions
	var format string
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B",
		Short: "Compare two stored runs metric by metric, with a significance test",
		Long: `Compare run B against run A. Samples are paired by guest group, workload, parameters
and metric; each pair gets the change of the mean with its 95% confidence interval and the
p-value of an exact (or, for many repetitions, sampled) permutation test. A change counts
only when p < --alpha and it exceeds --noise-floor.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return usageError{fmt.Errorf("unknown format %q (allowed: table, json)", format)}
			}
			if o.Alpha <= 0 || o.Alpha >= 1 || o.NoiseFloor < 0 {
				return usageError{fmt.Errorf("--alpha must be between 0 and 1 and --noise-floor at least 0")}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := cmd.Context()
			var ids [2]int64
			for i, ref := range args {
				if ids[i], err = st.ResolveRun(ctx, ref); err != nil {
					return err
				}
			}
			runA, err := st.GetRun(ctx, ids[0])
			if err != nil {
				return err
			}
			runB, err := st.GetRun(ctx, ids[1])
			if err != nil {
				return err
			}
			samplesA, err := st.Samples(ctx, ids[0])
			if err != nil {
				return err
			}
			samplesB, err := st.Samples(ctx, ids[1])
			if err != nil {
				return err
			}
			c := report.CompareRuns(runA, samplesA, runB, samplesB, o)
			if format == "json" {
				return report.WriteABJSON(os.Stdout, c)
			}
			return report.WriteABTable(os.Stdout, c, report.TableOptions{Color: isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == ""})
		},
	}
	cmd.Flags().Float64Var(&o.Alpha, "alpha", o.Alpha, "significance level of the permutation test")
	cmd.Flags().Float64Var(&o.NoiseFloor, "noise-floor", o.NoiseFloor, "smallest relative change that counts (0.05 = 5%)")
	cmd.Flags().StringVar(&format, "format", "table", "table or json")
	return cmd
}
