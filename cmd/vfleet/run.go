package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/container"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/telemetry"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/version"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

const defaultScenario = "default"

func newRunCommand(g *globalOptions) *cobra.Command {
	var htmlPath string
	var ab bool
	var obs observeFlags
	cmd := &cobra.Command{
		Use:   "run [SCENARIO] | run --ab SCENARIO_A SCENARIO_B",
		Short: "Run a scenario (a YAML file or a built-in name; default: " + defaultScenario + ")",
		Long: `Run a scenario: start its guests, run every workload in each, store every sample
and print the comparison against the baseline. SCENARIO is a path to a YAML file or
the name of a built-in scenario ('vfleet scenarios' lists them). An HTML report is
written next to the results.

With --ab, two scenarios run as two runs at once, step by step in alternating order
(A then B, then B then A, ...), so that drift of the machine cannot pass for a
difference between them; the A/B comparison is printed at the end.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case ab && len(args) != 2:
				return usageError{fmt.Errorf("--ab takes exactly two scenarios, got %d", len(args))}
			case !ab && len(args) > 1:
				return usageError{fmt.Errorf("run takes one scenario (or two with --ab), got %d", len(args))}
			case len(args) == 0:
				args = []string{defaultScenario}
			}
			return runScenarios(g, args, htmlPath, &obs, nil)
		},
	}
	cmd.Flags().StringVar(&htmlPath, "html", "", "where to write the HTML report (default ./vfleet-run-ID.html; \"-\" for none)")
	cmd.Flags().BoolVar(&ab, "ab", false, "run two scenarios interleaved and compare them")
	obs.register(cmd.Flags())
	return cmd
}

// runScenarios runs the scenarios and prints their reports; with an
// audit, it only starts the guests, audits them and prints that.
func runScenarios(g *globalOptions, refs []string, htmlPath string, obs *observeFlags, auditOnly *auditOptions) error {
	began := time.Now()
	var specs []*scenario.Spec
	for _, ref := range refs {
		spec, err := scenario.Load(ref, scenarioOptions(g))
		if err != nil {
			return usageError{err}
		}
		specs = append(specs, spec)
	}
	// A report that cannot be written is known now, not after the run.
	if err := checkHTMLPath(htmlPath); err != nil {
		return usageError{err}
	}
	if err := requireRoot("vfleet run"); err != nil {
		return err
	}
	// Before anything is built: a database the run cannot write is known now.
	st, err := store.Open(g.db())
	if err != nil {
		return err
	}
	defer st.Close()
	progress := newProgress()
	ctx, cancel := signalContext(progress)
	defer cancel()

	for _, spec := range specs {
		if err := probeKinds(ctx, spec); err != nil {
			return err
		}
	}
	img, err := ensureImage(ctx, g, progress, false)
	if err != nil {
		return err
	}
	images, err := prepareGuestImages(ctx, g, progress, specs...)
	if err != nil {
		return err
	}
	host, err := fingerprint(ctx, img, specs...)
	if err != nil {
		return err
	}
	abortOrphans(ctx, st, nil)

	opts := runner.Options{
		Store:       st,
		StateRoot:   g.stateDir,
		RootFS:      img.RootFS,
		AgentPath:   img.AgentPath,
		Images:      images.users,
		AgentBinary: images.agentBinary,
		Variants:    images.variants,
		Host:        host,
		Progress:    progress,
		AuditOnly:   auditOnly != nil,
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
			if err := auditOnly.print(rctx, st, id); err != nil {
				return err
			}
			continue
		}
		path := htmlPath
		if len(ids) > 1 && path != "" && path != "-" {
			path = fmt.Sprintf("%s-%c.html", strings.TrimSuffix(path, ".html"), 'A'+i)
		}
		if err := printRun(rctx, st, id, path); err != nil {
			return err
		}
	}
	if len(ids) == 2 && ids[0] != 0 && ids[1] != 0 {
		if err := printComparison(rctx, st, ids[0], ids[1]); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "finished in %s\n", time.Since(began).Round(time.Second))
	return runOutcome(rctx, st, ids, runErr)
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
func checkHTMLPath(path string) error { return checkOutputPath("--html", path) }

// checkOutputPath fails when a file a flag names could not be written: a
// directory, a directory that is missing or read-only, a file that cannot
// be created there (/proc) or that refuses writes (/dev/full).
func checkOutputPath(flag, path string) error {
	if path == "-" {
		return nil
	}
	dir := "."
	if path != "" {
		fi, err := os.Stat(path)
		switch {
		case err == nil && fi.IsDir():
			return fmt.Errorf("%s %s is a directory: give a file name", flag, path)
		case err == nil:
			return checkWritable(flag, path, fi)
		}
		dir = filepath.Dir(path)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s %s: no directory %s to write it in", flag, path, dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, cmp.Or(path, "(default)"), dir, err)
	}
	if path == "" {
		return nil
	}
	// Root may write in any directory by its mode, yet not create a file
	// in every one: only creating it tells.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%s %s: cannot create it: %w", flag, path, err)
	}
	f.Close()
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("%s %s: remove the trial file: %w", flag, path, err)
	}
	return nil
}

// checkWritable opens an existing file for writing, without truncating
// it, and writes nothing to it, which a device that refuses every write
// refuses too. A named pipe is left alone: opening it would wait for, or
// without waiting fail for want of, a reader that comes later.
func checkWritable(flag, path string, fi os.FileInfo) error {
	if fi.Mode()&os.ModeNamedPipe != 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|unix.O_NONBLOCK, 0)
	if err == nil {
		_, err = f.Write(nil)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("%s %s: cannot write it: %w", flag, path, err)
	}
	return nil
}

// abortOrphans marks the runs whose vfleet died as aborted, and says so.
// It is a courtesy to the store's readers: a failure is only reported.
func abortOrphans(ctx context.Context, st *store.Store, cleanedKeys map[string]bool) {
	aborted, err := runner.AbortOrphans(ctx, st, cleanedKeys)
	for _, r := range aborted {
		fmt.Fprintf(os.Stderr, "vfleet: run %d (%s) was left running: marked aborted, %s; its samples are kept\n", r.ID, r.ScenarioName, r.StatusReason)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vfleet: could not check for runs whose vfleet died: %v\n", err)
	}
}

func scenarioOptions(g *globalOptions) scenario.Options {
	return scenario.Options{KnownKinds: guest.KindNames(), CheckGuest: checkGuest,
		CheckImage: func(kind, path string) error { return checkImage(g.stateDir, kind, path) }}
}

// checkImage says whether a group of the kind can run the image at path:
// a VM boots a disk QEMU can read, the others run an OCI image's root
// file system, whose blobs all match their descriptors unless it is
// unpacked under stateDir already. Without qemu-img, the kind's probe
// says what to install.
func checkImage(stateDir, kind, path string) error {
	if !guest.TraitsOf(kind).AgentInGuest {
		return image.CheckOCI(stateDir, path)
	}
	qemuImg, err := tools.Find("qemu-img")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = image.InspectDisk(ctx, qemuImg.Path, path)
	return err
}

// guestImages are the images a run's guests need besides vfleet's own for
// this host: users' images, and vfleet's of the architectures its VMs
// emulate.
type guestImages struct {
	users map[string]runner.UserImage
	// agentBinary is the static agent users' images get brought in.
	agentBinary string
	variants    map[image.Variant]runner.VariantImage
}

// prepareGuestImages unpacks the users' images the scenarios name and
// builds vfleet's image of each emulated architecture, each once.
func prepareGuestImages(ctx context.Context, g *globalOptions, progress *telemetry.Progress, specs ...*scenario.Spec) (guestImages, error) {
	out := guestImages{users: map[string]runner.UserImage{}, variants: map[image.Variant]runner.VariantImage{}}
	logf := func(line string) { progress.Logf("image: %s", line) }
	for _, grp := range guestGroups(specs) {
		v := image.Variant{Arch: grp.Arch, KernelFlavour: grp.KernelFlavour}
		if _, done := out.variants[v]; !v.Default() && !done {
			img, err := ensureImageFor(ctx, g, progress, v, false)
			if err != nil {
				return out, fmt.Errorf("guest group %q: vfleet's image (%s): %w", grp.Name, v, err)
			}
			agentBin, err := g.agentBinaryFor(cmp.Or(v.Arch, image.HostArch))
			if err != nil {
				return out, err
			}
			out.variants[v] = runner.VariantImage{RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: agentBin}
		}
		if _, done := out.users[grp.Image]; grp.Image == "" || done {
			continue
		}
		if guest.TraitsOf(grp.Kind).AgentInGuest {
			// A VM boots the disk itself, with the agent brought in.
			out.users[grp.Image] = runner.UserImage{}
			continue
		}
		o, err := image.EnsureOCI(ctx, g.stateDir, grp.Image, logf)
		if err != nil {
			return out, fmt.Errorf("guest group %q: %w", grp.Name, err)
		}
		out.users[grp.Image] = runner.UserImage{RootFS: o.RootFS, Env: o.Env, Digest: o.Digest}
	}
	if len(out.users) == 0 {
		return out, nil
	}
	var err error
	out.agentBinary, err = g.agentBinary()
	return out, err
}

// checkGuest asks the group's kind to accept it; New touches nothing on
// the host, so this is safe while parsing.
func checkGuest(g scenario.GuestGroup) error {
	k, err := guest.Lookup(g.Kind)
	if err != nil {
		return err
	}
	_, err = k.New(g.GuestSpec(g.Name), guest.Env{})
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
	return ensureImageFor(ctx, g, progress, image.Variant{}, rebuild)
}

// ensureImageFor builds (or reuses) one of vfleet's images, with its
// architecture's agent installed.
func ensureImageFor(ctx context.Context, g *globalOptions, progress *telemetry.Progress, v image.Variant, rebuild bool) (*image.Image, error) {
	agentBin, err := g.agentBinaryFor(cmp.Or(v.Arch, image.HostArch))
	if err != nil {
		return nil, err
	}
	return image.Ensure(ctx, image.EnsureOptions{
		Root:        g.stateDir,
		Recipe:      image.RecipeOf(v),
		AgentBinary: agentBin,
		Rebuild:     rebuild,
		Progress:    func(line string) { progress.Logf("image: %s", line) },
	})
}

func fingerprint(ctx context.Context, img *image.Image, specs ...*scenario.Spec) (hostinfo.Fingerprint, error) {
	fp, err := hostinfo.Collect(hostinfo.Options{})
	if err != nil {
		return fp, fmt.Errorf("host fingerprint: %w", err)
	}
	fp.VfleetVer = version.String()
	fp.ToolVersions = map[string]string{}
	for _, p := range programs.Packages() {
		if v, ok := img.Manifest.Packages[p]; ok {
			fp.ToolVersions[p] = v
		}
	}
	fp.ToolVersions["image"] = img.Manifest.Hash
	if img.Manifest.Recipe.Programs != "" {
		for _, p := range native.Programs {
			fp.ToolVersions[filepath.Base(p.Name)] = "vfleet's own, source " + native.SourceHash(p)[:12]
		}
	}
	// The runtimes' versions matter as much as the tools': runc releases
	// change how cgroups are set up.
	for _, g := range guestGroups(specs) {
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

func guestGroups(specs []*scenario.Spec) []scenario.GuestGroup {
	var out []scenario.GuestGroup
	for _, s := range specs {
		out = append(out, s.Guests...)
	}
	return out
}
