package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/container"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/telemetry"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/version"
)

const defaultScenario = "default"

func newRunCommand(g *globalOptions) *cobra.Command {
	var htmlPath string
	cmd := &cobra.Command{
		Use:   "run [SCENARIO]",
		Short: "Run a scenario (a YAML file or a built-in name; default: " + defaultScenario + ")",
		Long: `Run a scenario: start its guests, run every workload in each, store every sample
and print the comparison against the baseline. SCENARIO is a path to a YAML file or
the name of a built-in scenario. An HTML report is written next to the results.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := defaultScenario
			if len(args) == 1 {
				ref = args[0]
			}
			return runScenario(g, ref, htmlPath)
		},
	}
	cmd.Flags().StringVar(&htmlPath, "html", "", "where to write the HTML report (default ./vfleet-run-ID.html; \"-\" for none)")
	return cmd
}

func runScenario(g *globalOptions, ref, htmlPath string) error {
	began := time.Now()
	spec, err := scenario.Load(ref, scenarioOptions())
	if err != nil {
		return err
	}
	if err := requireRoot("vfleet run"); err != nil {
		return err
	}
	progress := newProgress()
	ctx, cancel := signalContext(progress)
	defer cancel()

	if err := probeKinds(ctx, spec); err != nil {
		return err
	}
	img, err := ensureImage(ctx, g, progress, false)
	if err != nil {
		return err
	}
	host, err := fingerprint(ctx, img, spec)
	if err != nil {
		return err
	}
	st, err := store.Open(g.db())
	if err != nil {
		return err
	}
	defer st.Close()

	plan := spec.Expand()
	progress.Logf("scenario %s: %d guests, %d steps; results in %s", spec.Name, len(plan.Guests), len(plan.Steps), g.db())
	runID, runErr := runner.Run(ctx, plan, runner.Options{
		Store:     st,
		StateRoot: g.stateDir,
		RootFS:    img.RootFS,
		AgentPath: img.AgentPath,
		Host:      host,
		Progress:  progress,
	})
	progress.Done()
	if runID == 0 {
		return runErr
	}
	// The report is printed even for an interrupted run: what was measured
	// is kept and worth seeing.
	if err := printRun(context.WithoutCancel(ctx), st, runID, htmlPath); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "run %d finished in %s\n", runID, time.Since(began).Round(time.Second))
	if runErr != nil {
		if interrupted(runErr) {
			return fmt.Errorf("run %d interrupted; the samples measured so far are kept (status incomplete)", runID)
		}
		return fmt.Errorf("run %d: %w", runID, runErr)
	}
	return nil
}

func scenarioOptions() scenario.Options {
	return scenario.Options{KnownKinds: guest.KindNames(), CheckGuest: checkGuest}
}

// checkGuest asks the group's kind to accept it; New touches nothing on
// the host, so this is safe while parsing.
func checkGuest(g scenario.GuestGroup) error {
	k, err := guest.Lookup(g.Kind)
	if err != nil {
		return err
	}
	_, err = k.New(guest.Spec{Name: g.Name, Kind: g.Kind, Runtime: g.Runtime, CPUs: g.CPUs, MemoryBytes: g.MemoryBytes, CPULimit: g.CPULimit}, guest.Env{})
	return err
}

// probeKinds checks, before anything is built or started, that the host
// can run every kind and runtime the scenario asks for.
func probeKinds(ctx context.Context, spec *scenario.Spec) error {
	seen := map[string]bool{}
	for _, grp := range spec.Guests {
		key := grp.Kind + "/" + grp.Runtime
		if seen[key] {
			continue
		}
		seen[key] = true
		k, err := guest.Lookup(grp.Kind)
		if err != nil {
			return err
		}
		if err := k.Probe(ctx, grp.Runtime); err != nil {
			return fmt.Errorf("guest group %q: %w", grp.Name, err)
		}
	}
	return nil
}

func ensureImage(ctx context.Context, g *globalOptions, progress *telemetry.Progress, rebuild bool) (*image.Image, error) {
	agentBin, err := g.agentBinary()
	if err != nil {
		return nil, err
	}
	return image.Ensure(ctx, image.EnsureOptions{
		Root:        g.stateDir,
		Recipe:      image.DefaultRecipe(),
		AgentBinary: agentBin,
		Rebuild:     rebuild,
		Progress:    func(line string) { progress.Logf("image: %s", line) },
	})
}

// measuringPackages are the image packages whose versions every run records.
var measuringPackages = []string{"stress-ng", "sysbench", "fio", "iperf3", "sockperf", "rt-tests"}

func fingerprint(ctx context.Context, img *image.Image, spec *scenario.Spec) (hostinfo.Fingerprint, error) {
	fp, err := hostinfo.Collect(hostinfo.Options{})
	if err != nil {
		return fp, fmt.Errorf("host fingerprint: %w", err)
	}
	fp.VfleetVer = version.String()
	fp.ToolVersions = map[string]string{}
	for _, p := range measuringPackages {
		if v, ok := img.Manifest.Packages[p]; ok {
			fp.ToolVersions[p] = v
		}
	}
	fp.ToolVersions["image"] = img.Manifest.Hash
	// The runtimes' versions matter as much as the tools': runc releases
	// change how cgroups are set up.
	for _, g := range spec.Guests {
		if g.Kind != container.KindName {
			continue
		}
		rt := g.Runtime
		if rt == "" {
			rt = container.DefaultRuntime
		}
		if t, err := tools.Find(rt); err == nil {
			if v, err := tools.Version(ctx, t); err == nil {
				fp.ToolVersions[rt] = v
			}
		}
	}
	return fp, nil
}
