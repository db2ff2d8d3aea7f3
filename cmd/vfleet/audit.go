package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/store"
)

func newAuditCommand(g *globalOptions) *cobra.Command {
	var opts auditOptions
	var obs observeFlags
	cmd := &cobra.Command{
		Use:   "audit [SCENARIO]",
		Short: "Start a scenario's guests, audit how isolated each is, and stop them (default: " + defaultScenario + ")",
		Long: `Start the guests of a scenario (its first fleet size), run read-only isolation probes in
each through its agent, and stop them; nothing is measured. The probes say what each guest
holds (capabilities, seccomp, no_new_privs, LSM, user namespace), what it shares with the
host (kernel, namespaces, processes), which devices it can open, which kernel settings it
could write, and whom it reaches on the run's network. Each group is scored against what a
container runtime deploys by default. Every run does the same audit; its report shows it.

With --attack, each guest also tries known ways out, each stopped before it could change
anything (docs/security.md): a cgroup release_agent (CVE-2022-0492), core_pattern, a host
block device, /proc/1/root and /proc/1/ns, ptrace of pid 1, /dev/kvm and /dev/mem, loading a
module, rewriting the running binaries (CVE-2019-5736's class), open_by_handle_at
("shocker"), and a user namespace of its own. Each is reported blocked (by what), contained
(it went through, to the guest's own kernel, root or namespaces) or escaped (it reached the
host, with the evidence); escapes lower the group's audit score.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("audit takes one scenario, got %d", len(args))}
			}
			if len(args) == 0 {
				args = []string{defaultScenario}
			}
			if err := checkJSONPath(g, opts.jsonPath); err != nil {
				return usageError{err}
			}
			return runScenarios(g, args, "-", &obs, &opts, nil, nil)
		},
	}
	cmd.Flags().StringVar(&opts.jsonPath, "json", "", "also write the audit, with every probe's raw evidence, as JSON to this file")
	cmd.Flags().BoolVar(&opts.attack, "attack", false, "also try known escapes from each guest, non-destructively, and report what stopped each")
	obs.register(cmd.Flags())
	return cmd
}

// auditOptions are what `vfleet audit` prints and writes.
type auditOptions struct {
	jsonPath string
	attack   bool
}

// print shows a run's audit and writes its JSON when asked.
func (o *auditOptions) print(ctx context.Context, g *globalOptions, st *store.Store, id int64) error {
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return err
	}
	failures, err := st.Failures(ctx, id)
	if err != nil {
		return err
	}
	c := report.Build(run, nil, failures)
	if c.Audit, err = loadAudit(ctx, st, run); err != nil {
		return err
	}
	if c.Audit == nil {
		return fmt.Errorf("run %d: no guest could be audited", id)
	}
	fmt.Printf("run %d · %s · audit\n", run.ID, run.ScenarioName)
	if err := report.WriteAudit(os.Stdout, c, tableOptions(os.Stdout)); err != nil {
		return err
	}
	if o.jsonPath == "" {
		return nil
	}
	return g.writeJSON(o.jsonPath, struct {
		Run   int64 `json:"run"`
		Audit any   `json:"audit"`
	}{run.ID, c.Audit})
}

// checkJSONPath fails early when the audit's JSON could not be written.
func checkJSONPath(g *globalOptions, path string) error {
	if path == "" {
		return nil
	}
	return g.checkOutputPath("--json", path)
}
