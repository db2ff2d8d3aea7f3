package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/vfleet/vfleet/internal/archive"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/remoterun"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
	"github.com/vfleet/vfleet/scenarios"
)

// onFlags are how `run --on`, `capacity --on` and `clean --on` reach
// other machines.
type onFlags struct {
	urls                 []string
	identity, knownHosts string
	image                string
	parallel             bool
}

// register adds the flags; what says what --on does, and runs whether
// the command runs something there (which takes --image and --parallel).
func (f *onFlags) register(fs *pflag.FlagSet, what string, runs bool) {
	fs.Var((*machineList)(&f.urls), "on", what+" (ssh://USER@HOST[:PORT], comma-separated or repeated)")
	fs.StringVar(&f.identity, "on-identity", "", "private key file for the machines (default: the SSH agent's keys only)")
	fs.StringVar(&f.knownHosts, "on-known-hosts", "", "known_hosts file the machines' host keys are checked against (default ~/.ssh/known_hosts)")
	if runs {
		fs.StringVar(&f.image, "image", remoterun.ImageAuto, "with --on, how a machine gets its guest image: push (this machine's cached image) or build (there); default push when cached here, else build")
		fs.BoolVar(&f.parallel, "parallel", false, "with --on, run on every machine at once (default one after another)")
	}
}

// errEmptyMachine refuses an empty machine URL: left out, --on and --peer
// mean this machine, so an empty one (a script's unset $HOSTS) would do
// the opposite of what was asked.
var errEmptyMachine = errors.New("an empty machine URL: give ssh://USER@HOST[:PORT], or leave the flag out for this machine")

// machineList is --on's value: machine URLs, comma-separated or repeated,
// none of them empty.
type machineList []string

func (l *machineList) Set(s string) error {
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u == "" {
			return errEmptyMachine
		}
		*l = append(*l, u)
	}
	return nil
}

func (l *machineList) String() string { return strings.Join(*l, ",") }
func (l *machineList) Type() string   { return "strings" }

// machineURL is --peer's value: one machine URL, not empty.
type machineURL string

func (u *machineURL) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errEmptyMachine
	}
	*u = machineURL(s)
	return nil
}

func (u *machineURL) String() string { return string(*u) }
func (u *machineURL) Type() string   { return "string" }

// checkAlone refuses --image and --parallel without --on.
func (f *onFlags) checkAlone() error {
	if len(f.urls) == 0 && (f.image != "" || f.parallel) {
		return usageError{errors.New("--image and --parallel go with --on")}
	}
	return nil
}

// prepare checks what running the scenario ref on the machines needs
// before any is reached, and returns them.
func (f *onFlags) prepare(ref string) ([]remote.Target, error) {
	targets, err := f.targets()
	if err != nil {
		return nil, err
	}
	if f.image != remoterun.ImageAuto && f.image != remoterun.ImagePush && f.image != remoterun.ImageBuild {
		return nil, usageError{fmt.Errorf("--image %q: want push or build", f.image)}
	}
	// The machine reads the scenario, checked against its own host there;
	// here it need only exist.
	if fi, err := os.Stat(ref); err != nil || !fi.Mode().IsRegular() {
		if _, lerr := scenarios.Lookup(ref); lerr != nil {
			return nil, usageError{fmt.Errorf("scenario %q: no such file, and no built-in scenario of that name (built-ins: %s): %w",
				ref, strings.Join(scenarios.Names(), ", "), fs.ErrNotExist)}
		}
	}
	return targets, nil
}

// options are remoterun's for the scenario ref, its runs imported into st.
func (f *onFlags) options(g *globalOptions, st *store.Store, ref string) remoterun.Options {
	return remoterun.Options{
		Config: f.config(), Scenario: ref, StateDir: g.stateDir, Image: f.image,
		Binaries: remoteBinaries(g), Log: machineLog(os.Stderr),
		Import: func(ctx context.Context, t remote.Target, r io.Reader) ([]int64, error) {
			return importRuns(ctx, st, t, r)
		},
	}
}

// each runs opts on every machine, one after another or, with
// --parallel, at once; a machine that fails does not stop the others.
func (f *onFlags) each(ctx context.Context, targets []remote.Target, opts remoterun.Options) []remoterun.Result {
	results := make([]remoterun.Result, len(targets))
	if f.parallel && len(targets) > 1 {
		fmt.Fprintln(os.Stderr, "vfleet: --parallel: the machines run at once; their runs must not share a network under test (a switch, a peer), or each measures the others' traffic")
		var wg sync.WaitGroup
		for i, t := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = remoterun.Run(ctx, t, opts)
			}()
		}
		wg.Wait()
		return results
	}
	for i, t := range targets {
		if ctx.Err() != nil {
			results[i] = remoterun.Result{Target: t, Exit: -1, Err: fmt.Errorf("%s: not started: %w", t.Name(), context.Cause(ctx))}
			continue
		}
		results[i] = remoterun.Run(ctx, t, opts)
	}
	return results
}

// targets parses the machines' URLs, each once, and checks the key files
// that reach them, before any is reached.
func (f *onFlags) targets() ([]remote.Target, error) {
	if err := f.config().Check(); err != nil {
		return nil, usageError{fmt.Errorf("--on-identity or --on-known-hosts: %w", err)}
	}
	var ts []remote.Target
	for _, u := range f.urls {
		t, err := remote.ParseURL(u)
		if err != nil {
			return nil, usageError{fmt.Errorf("--on: %w", err)}
		}
		if slices.Contains(ts, t) {
			return nil, usageError{fmt.Errorf("--on: %s given twice", t)}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func (f *onFlags) config() remote.Config {
	return remote.Config{Identity: f.identity, KnownHosts: f.knownHosts}
}

// machineLog writes the lines about each machine to w, each prefixed with
// the machine's name, whole lines at a time when machines run at once.
// A line is the machine's words, escaped: it must not drive this terminal.
func machineLog(w io.Writer) func(remote.Target, string) {
	var mu sync.Mutex
	return func(t remote.Target, line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "[%s] %s\n", t.Name(), termtext.Safe(line))
	}
}

// remoteBinaries finds the static vfleet and agent for a machine's
// architecture beside this vfleet, as scripts/build.sh leaves them.
func remoteBinaries(g *globalOptions) func(arch string) (string, string, error) {
	return func(arch string) (string, string, error) {
		self, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("find vfleet: %w", err)
		}
		return binariesFor(self, g.agentPath, arch)
	}
}

// binariesFor are vfleet-ARCH beside self (self itself, for its own
// architecture, when there is none) and the agent as the guests' is
// found.
func binariesFor(self, agentPath, arch string) (string, string, error) {
	agent, err := session.AgentBinary(cmp.Or(agentPath, filepath.Join(filepath.Dir(self), "vfleet-agent")), arch)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", remoterun.ErrNoBinary, err)
	}
	p := filepath.Join(filepath.Dir(self), "vfleet-"+arch)
	if _, err := os.Stat(p); err == nil {
		return p, agent, nil
	}
	if arch == image.HostArch {
		return self, agent, nil
	}
	return "", "", fmt.Errorf("%w: %s not found (vfleet for %s machines); build it with scripts/build.sh", remoterun.ErrNoBinary, p, arch)
}

// runOn runs the scenario on each machine of --on and brings the runs
// back into the local store; a machine that fails does not stop the
// others.
func runOn(g *globalOptions, ref, htmlPath string, f *onFlags) error {
	targets, err := f.prepare(ref)
	if err != nil {
		return err
	}
	if err := g.checkHTMLPath(htmlPath); err != nil {
		return usageError{err}
	}
	wk, err := g.begin(workOptions{plain: true})
	if err != nil {
		return err
	}
	defer wk.end()
	st, ctx := wk.st, wk.ctx
	results := f.each(ctx, targets, f.options(g, st, ref))

	rctx := context.WithoutCancel(ctx)
	var ids []int64
	for _, r := range results {
		ids = append(ids, r.Runs...)
	}
	for _, id := range ids {
		if err := printRun(rctx, g, st, id, numbered(htmlPath, ".html", id, len(ids) > 1)); err != nil {
			return err
		}
	}
	printMachines(rctx, os.Stdout, st, results)
	return onOutcome(rctx, st, results, ctx.Err())
}

// printMachines is the summary: each machine, how it went, the runs it
// brought back and why it failed.
func printMachines(ctx context.Context, w io.Writer, st *store.Store, results []remoterun.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tRESULT\tRUN\tSTATUS\tTOOK\tWHY")
	for _, r := range results {
		result, run, status, why := "ok", "—", "—", ""
		if r.Err != nil {
			result, why = "FAILED", oneLine(r.Err.Error())
		}
		for _, id := range r.Runs {
			run = fmt.Sprint(id)
			if sr, err := st.GetRun(ctx, id); err == nil {
				status = sr.Status
				if why == "" {
					why = sr.StatusReason
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Target.Name(), result, run, status, r.Took.Round(time.Second), why)
	}
	tw.Flush()
}

// numbered is the file path names for the output of id when there are
// many: path-ID.ext; path itself when there is one, or for none ("") or
// standard output ("-").
func numbered(path, ext string, id int64, many bool) string {
	if !many || path == "" || path == "-" {
		return path
	}
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), id, ext)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// onOutcome is the exit status of `run --on` (docs/results.md): 130 when
// interrupted, 1 when a machine failed (its run did not come back, or it
// never started), 3 when every run came back but some with failures.
func onOutcome(ctx context.Context, st *store.Store, results []remoterun.Result, interruptedBy error) error {
	var failed []string
	var ids []int64
	for _, r := range results {
		if r.Err != nil {
			failed = append(failed, r.Target.Name())
		}
		ids = append(ids, r.Runs...)
	}
	switch {
	case interruptedBy != nil:
		return exitError{exitInterrupted, errors.New("interrupted; what the machines measured so far is kept (status incomplete)")}
	case len(failed) > 0:
		return fmt.Errorf("%d of %d machines failed: %s (see the summary above)", len(failed), len(results), strings.Join(failed, ", "))
	}
	return runOutcome(ctx, st, ids, nil)
}

// importRuns reads what `vfleet export` wrote on the machine into the
// local store, each run marked with the machine's URL: where it was
// measured, never a credential.
func importRuns(ctx context.Context, st *store.Store, t remote.Target, r io.Reader) ([]int64, error) {
	imported, err := archive.Import(ctx, st, r, archive.ImportOptions{Origin: t.String()})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(imported))
	for i, x := range imported {
		ids[i] = x.ID
		if x.Differs {
			fmt.Fprintf(os.Stderr, "vfleet: warning: %s: run %s is already present as #%d, and what the machine sent differs from it: kept the stored one\n", t.Name(), termtext.Safe(x.Key), x.ID)
		}
	}
	return ids, nil
}
