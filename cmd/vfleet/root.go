package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/interrupt"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/telemetry"
	"github.com/vfleet/vfleet/internal/version"
)

// Defaults, documented in the README; each can be overridden by a flag or
// an environment variable.
const (
	defaultStateDir = image.DefaultRoot
	dbFileName      = "results.db"
)

type globalOptions struct {
	stateDir  string
	dbPath    string
	agentPath string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "vfleet",
		Short: "Measure what isolation costs: fleets of guests, standard benchmarks, statistics",
		Long: `vfleet launches fleets of isolated guests (the bare host as baseline, OCI containers, QEMU
VMs and microVMs), runs the standard measuring tools inside them and reports overhead against
bare metal with statistics.

Start with 'vfleet doctor', then 'vfleet run' (the built-in default scenario);
'vfleet scenarios' lists the built-in scenarios.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", envOr("VFLEET_STATE_DIR", defaultStateDir), "where images, run state and ledgers live (env VFLEET_STATE_DIR)")
	pf.StringVar(&g.dbPath, "db", os.Getenv("VFLEET_DB"), "results database (env VFLEET_DB; default STATE_DIR/"+dbFileName+")")
	pf.StringVar(&g.agentPath, "agent", os.Getenv("VFLEET_AGENT"), "vfleet-agent binary to install in the image (env VFLEET_AGENT; default: next to vfleet)")

	root.AddCommand(
		newRunCommand(g),
		newCapacityCommand(g),
		newAuditCommand(g),
		newRunsCommand(g),
		newReportCommand(g),
		newCompareCommand(g),
		newExportCommand(g),
		newImportCommand(g),
		newBaselineCommand(g),
		newImageCommand(g),
		newDoctorCommand(g),
		newCleanCommand(g),
		newServeCommand(g),
		newFleetCommand(g),
		newScenariosCommand(),
	)
	usageArgs(root)
	return root
}

// usageArgs makes a wrong number of arguments, and an unknown command,
// usage errors (exit 2) in cmd and every command under it. A command that
// only groups others gets a RunE, without which cobra would print its help
// and exit 0 for a command it does not have.
func usageArgs(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
	if cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.SuggestionsMinimumDistance = 2 // cobra's own, set only when it reports
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", cutRunes(args[0], 40), cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return usageError{errors.New(msg)}
		}
		return
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
}

func (g *globalOptions) db() string {
	if g.dbPath != "" {
		return g.dbPath
	}
	return filepath.Join(g.stateDir, dbFileName)
}

// session is where the guests of run, audit and fleet up are prepared.
func (g *globalOptions) session(progress *telemetry.Progress) session.Config {
	return session.Config{StateDir: g.stateDir, AgentPath: g.agentPath, Progress: progress, Warnings: os.Stderr}
}

func requireRoot(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (namespaces, mounts and containers): run it with sudo", what)
	}
	return nil
}

// work is what run, capacity, fleet up and their --on forms hold while
// they work: the results store, their progress and their context.
type work struct {
	st       *store.Store
	progress *telemetry.Progress
	ctx      context.Context
	cancel   context.CancelFunc
}

// workOptions say how a command's work is shown and stopped.
type workOptions struct {
	// plain: a line for each thing said, never a status line; --on's
	// machines say theirs one after another.
	plain bool
	// eof, when not nil, stops the work at its end as a SIGINT does
	// (interruptible).
	eof io.Reader
}

// begin opens the results store, before anything is built, so that a
// database the command cannot write is known at once; then the progress,
// and the context the first SIGINT or SIGTERM cancels.
func (g *globalOptions) begin(o workOptions) (*work, error) {
	st, err := store.Open(g.db())
	if err != nil {
		return nil, err
	}
	progress := telemetry.NewProgress(os.Stderr, !o.plain && isTerminal(os.Stderr))
	ctx, cancel := interruptible(progress, o.eof)
	return &work{st: st, progress: progress, ctx: ctx, cancel: cancel}, nil
}

// end lets the signals go, then closes the store.
func (w *work) end() {
	w.cancel()
	w.st.Close()
}

// signalContext is cancelled by the first SIGINT or SIGTERM, which
// progress reports; a second one is left to its default action, so an
// impatient user can still kill vfleet (and then run 'vfleet clean').
func signalContext(progress *telemetry.Progress) (context.Context, context.CancelFunc) {
	return interruptible(progress, nil)
}

// interruptible is signalContext, with the end of eof, when not nil, a
// SIGINT too (interrupt.OnSignal): how `run --on` stops a run on another
// machine.
func interruptible(progress *telemetry.Progress, eof io.Reader) (context.Context, context.CancelFunc) {
	return interrupt.OnSignal(func(s os.Signal) {
		progress.Logf("%s: stopping after tearing everything down (again to abort; then run 'vfleet clean')", s)
	}, eof)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// tableOptions are how a table is printed to w: coloured and as wide as
// the terminal when w is one, else plain and wide unless COLUMNS says how
// many columns the reader has.
func tableOptions(w io.Writer) report.TableOptions {
	f, ok := w.(*os.File)
	if ok && isTerminal(f) {
		width, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			width = 0
		}
		return report.TableOptions{Color: os.Getenv("NO_COLOR") == "", Width: width}
	}
	width, _ := strconv.Atoi(os.Getenv("COLUMNS"))
	return report.TableOptions{Width: max(width, 0)}
}

func newProgress() *telemetry.Progress {
	return telemetry.NewProgress(os.Stderr, isTerminal(os.Stderr))
}

// interrupted says whether err came from the user's Ctrl-C.
func interrupted(err error) bool { return errors.Is(err, context.Canceled) }
