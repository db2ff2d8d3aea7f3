package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
)

func newBaselineCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "Name the run a scenario's later runs are compared with ('compare --baseline')",
		Long: `A baseline is a complete run that later runs of its scenario on the same machine are
compared with by 'vfleet compare --baseline' (and 'vfleet run --baseline'), which exits
non-zero when something got worse. There is one per scenario name and machine (the host
name the run recorded); setting another replaces it.`,
	}
	var machine string
	unset := &cobra.Command{
		Use:   "unset SCENARIO",
		Short: "Forget the baseline of a scenario on this machine (or --machine); its run stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if machine == "" {
				var err error
				if machine, err = thisMachine(); err != nil {
					return err
				}
			}
			st, err := openStoreToWrite(g)
			if err != nil {
				return err
			}
			defer st.Close()
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
	unset.Flags().StringVar(&machine, "machine", "", "the machine whose baseline to forget, as 'baseline show' names it (default: this one)")
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
			b, err := st.SetBaseline(cmd.Context(), id, time.Now())
			if err != nil {
				if errors.Is(err, store.ErrNotComplete) {
					return fmt.Errorf("%w: a baseline must be a complete run, one that measured every step", err)
				}
				return err
			}
			fmt.Fprintf(os.Stderr, "run %d is the baseline of scenario %s on %s\n", b.RunID, b.ScenarioName, b.Machine)
			return nil
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
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", b.ScenarioName, b.Machine, b.RunID, b.Set.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}, unset)
	return cmd
}

// openStoreToWrite opens the results database to write, without creating
// one: a baseline names a run already stored.
func openStoreToWrite(g *globalOptions) (*store.Store, error) {
	if _, err := os.Stat(g.db()); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no results database at %s: a baseline is a stored run (run 'vfleet run' first, or pass --db)", g.db())
	}
	return store.Open(g.db())
}

// thisMachine names this machine as its runs' fingerprints do.
func thisMachine() (string, error) {
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("name this machine: %w", err)
	}
	return hostinfo.Fingerprint{Hostname: name}.Machine(), nil
}
