package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/fleet"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/session"
)

func newFleetCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Keep a testbed of guests up between commands (up, status, exec, down)",
		Long: `A long-lived fleet: the guests of a scenario started once and left running after vfleet
exits, to run commands in them as often as needed, until 'vfleet fleet down' removes them.

The scenario's workloads are not run. Every resource a fleet creates is recorded in its
ledger like a run's, so 'vfleet clean' also removes fleets: their 'up' process has exited.
See docs/testbed.md.`,
	}
	cmd.AddCommand(newFleetUpCommand(g), newFleetStatusCommand(g), newFleetExecCommand(g), newFleetDownCommand(g))
	return cmd
}

func newFleetUpCommand(g *globalOptions) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "up SCENARIO [--name NAME]",
		Short: "Start a scenario's guests (and network) and leave them running",
		Long: `Start every guest of SCENARIO (a YAML file or a built-in name), and its network if it has a
network section, and return with them running. The fleet is called NAME (default: the
scenario's name); a fleet of that name must not be up already. A fleet comes up whole or not
at all: if any guest fails to start, or on Ctrl-C, everything started is torn down.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fleetError(fleetUp(g, args[0], name))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the fleet's name (default: the scenario's name)")
	return cmd
}

func newFleetStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status [NAME]",
		Short: "List the fleets, or show one fleet's guests: agent answering, processes alive, uptime",
		Long: `Without NAME, list the fleets; with NAME, or when exactly one fleet exists, show each of its
guests: whether its agent answers, whether its processes are alive, and its uptime. A fleet
whose resources are gone (removed by 'vfleet clean') is shown as gone and forgotten.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot("vfleet fleet status"); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return fleetError(fleetStatus(cmd.Context(), g, name))
		},
	}
}

func newFleetExecCommand(g *globalOptions) *cobra.Command {
	var fleetName string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec [--fleet NAME] [--timeout D] GUEST -- COMMAND [ARG...]",
		Short: "Run a command in one guest of a fleet, with its output and exit status",
		Long: `Run COMMAND in GUEST through the guest's agent, copy its standard output and error to ours
and exit with its exit status. The command gets no standard input, and its output is shown
once it has finished. vfleet's flags go before GUEST, the command after '--'. --fleet may be
left out when exactly one fleet is up.

Exit status: the command's own when it ran to its end; 124 when it ran past --timeout
and was killed; 128+N when a signal N ended it; 255 when the guest's agent is not
answering (check the guests with 'vfleet fleet status'); 1, or 2 for a usage error, when
vfleet itself could not run the command.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			command, err := execCommand(args)
			if err != nil {
				return err
			}
			if timeout < agent.MinTimeout {
				return usageError{fmt.Errorf("--timeout %s: want a duration of at least %s, like 30s or 10m", timeout, agent.MinTimeout)}
			}
			if err := requireRoot("vfleet fleet exec"); err != nil {
				return err
			}
			code, err := g.fleets().Exec(fleetName, args[0], command, timeout, os.Stdout, os.Stderr)
			if code, err = execOutcome(os.Stderr, code, err); err != nil {
				return fleetError(err)
			}
			if code != 0 {
				// The command's own status, or the guest's silence: not
				// an error of vfleet's, and nothing is left to print or close.
				os.Exit(code)
			}
			return nil
		},
	}
	// Everything after GUEST is the command's, flags included.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&fleetName, "fleet", "", "the fleet (default: the only one up)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "kill the command after this long")
	return cmd
}

const execUsage = "vfleet fleet exec [--fleet NAME] [--timeout D] GUEST -- COMMAND [ARG...]"

// execCommand finds the command in exec's arguments, GUEST first. Flag
// parsing stops at GUEST, so a flag of vfleet's given after it would
// otherwise silently become the command: a '--' further on shows the user
// meant the command to start there.
func execCommand(args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, usageError{errors.New("exec takes a guest and a command: " + execUsage)}
	}
	command := args[1:]
	// A word that looks like a flag before the '--' is one of vfleet's put
	// after GUEST; a command that has its own '--' (git log -- FILE) is not.
	if command[0] == "--" {
		command = command[1:]
	} else if strings.HasPrefix(command[0], "-") && slices.Contains(command, "--") {
		return nil, usageError{fmt.Errorf("%q comes between guest %s and '--': vfleet's flags go before GUEST and the command after '--': %s",
			cutRunes(command[0], 40), args[0], execUsage)}
	}
	if len(command) == 0 {
		return nil, usageError{errors.New("exec takes a guest and a command: " + execUsage)}
	}
	return command, nil
}

// cutRunes shortens s to at most n runes, marking the cut.
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func newFleetDownCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "down [NAME]",
		Short: "Stop a fleet and remove everything it created, saying what",
		Long: `Stop the fleet's guests and remove everything it created (processes, containers, mounts,
cgroups, network namespaces, state), newest first, and mark its run complete. NAME may be left
out when exactly one fleet is up.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot("vfleet fleet down"); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return fleetError(fleetDown(g, name))
		},
	}
}

// fleets are the fleets of the state directory; what they tell without
// failing goes to stderr.
func (g *globalOptions) fleets() fleet.Dir { return fleet.At(g.stateDir, os.Stderr) }

// fleetError makes the fleet package's errors in how it was called usage
// errors.
func fleetError(err error) error {
	if errors.Is(err, fleet.ErrUsage) {
		return usageError{err}
	}
	return err
}

func fleetUp(g *globalOptions, ref, name string) error {
	spec, err := scenario.Load(ref, session.ScenarioOptions(g.stateDir))
	if err != nil {
		return err
	}
	if spec.Network != nil && spec.Network.Peer != "" {
		return usageError{fmt.Errorf("%w: its agent lives as long as the SSH connection of the vfleet that started it; run the scenario with 'vfleet run'", runner.ErrDetachedPeer)}
	}
	if name == "" {
		name = spec.Name
	}
	if err := fleet.CheckName(name); err != nil {
		return err
	}
	if err := requireRoot("vfleet fleet up"); err != nil {
		return err
	}
	fleets := g.fleets()
	if err := fleets.Free(context.Background(), name); err != nil {
		return err
	}
	db, err := filepath.Abs(g.db())
	if err != nil {
		return err
	}
	wk, err := g.begin(workOptions{})
	if err != nil {
		return err
	}
	defer wk.end()
	st, progress, ctx := wk.st, wk.progress, wk.ctx
	sess, err := session.Prepare(ctx, g.session(progress), spec)
	if err != nil {
		return err
	}
	up, err := fleets.Up(ctx, spec, name, db, sess.Options(ctx, st), progress.Done)
	if err != nil {
		return err
	}

	state := up.State
	fmt.Fprintf(os.Stdout, "fleet %s is up: %d guests (run %d), launched in %s\n", name, len(state.Guests), state.RunID, up.LaunchTime.Round(10*time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GUEST\tGROUP\tKIND\tPIDS\tBOOT")
	for _, gs := range state.Guests {
		boot := "—"
		if rec, ok := up.Run.Guests[gs.Name]; ok && rec.BootNS > 0 {
			boot = time.Duration(rec.BootNS).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", gs.Name, gs.Group, gs.KindLabel(), joinPIDs(gs.PIDs), boot)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "run commands with 'vfleet fleet exec --fleet %s GUEST -- COMMAND'; remove it with 'vfleet fleet down %s'\n", name, name)
	return nil
}

func fleetStatus(ctx context.Context, g *globalOptions, name string) error {
	fleets := g.fleets()
	if name == "" {
		all, err := fleets.List()
		if err != nil {
			return err
		}
		if len(all) != 1 {
			return listFleetTable(ctx, fleets, all)
		}
		name = all[0].Name
	}
	s, err := fleets.Read(name)
	if err != nil {
		return err
	}
	if fleets.Gone(s.RunKey) {
		fleets.Forget(ctx, s)
		fmt.Fprintf(os.Stdout, "fleet %s is gone: its guests and resources were removed (by 'vfleet clean'?); forgotten\n", name)
		return nil
	}
	health := fleet.CheckGuests(ctx, s.Guests)
	fmt.Fprintf(os.Stdout, "fleet %s: run %d, scenario %s (%s), up %s\n", s.Name, s.RunID, s.Scenario, s.Source, since(s.Started))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GUEST\tGROUP\tKIND\tAGENT\tPIDS\tUPTIME")
	answering, reachable := 0, 0
	for i, gs := range s.Guests {
		h := health[i]
		agentCol := "—"
		if gs.AgentAddr != "" {
			reachable++
			agentCol = "answers"
			if h.AgentErr != nil {
				agentCol = "NO ANSWER: " + h.AgentErr.Error()
			} else {
				answering++
			}
		}
		pids := "—"
		if len(gs.PIDs) > 0 {
			var parts []string
			for j, pid := range gs.PIDs {
				state := "alive"
				if !h.Alive[j] {
					state = "DEAD"
				}
				parts = append(parts, fmt.Sprintf("%d %s", pid, state))
			}
			pids = strings.Join(parts, ", ")
		}
		uptime := "—"
		if h.AgentErr == nil && gs.AgentAddr != "" || h.AnyAlive() {
			uptime = since(s.Started)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", gs.Name, gs.Group, gs.KindLabel(), agentCol, pids, uptime)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "%d of %d agents answer\n", answering, reachable)
	return nil
}

func listFleetTable(ctx context.Context, fleets fleet.Dir, all []fleet.State) error {
	if len(all) == 0 {
		fmt.Fprintln(os.Stdout, "no fleet is up; start one with 'vfleet fleet up SCENARIO'")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN\tSCENARIO\tGUESTS\tUP\tSTATE")
	for _, s := range all {
		state, up := "up", since(s.Started)
		if fleets.Gone(s.RunKey) {
			fleets.Forget(ctx, s)
			state, up = "gone (removed by 'vfleet clean'?); forgotten", "—"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", s.Name, s.RunID, s.Scenario, len(s.Guests), up, state)
	}
	return tw.Flush()
}

// exitNotAnswering is exec's status when the guest's agent gives no
// answer: ssh's when it cannot reach the host, so that a script can tell a
// dead guest from a command that failed.
const exitNotAnswering = 255

// execOutcome turns fleet exec's result into its exit status: a guest not
// answering is told on w and gets exitNotAnswering; any other error is
// left to be reported as vfleet's own.
func execOutcome(w io.Writer, code int, err error) (int, error) {
	if errors.Is(err, fleet.ErrNotAnswering) {
		fmt.Fprintf(w, "vfleet: %v\n", err)
		return exitNotAnswering, nil
	}
	return code, err
}

func fleetDown(g *globalOptions, name string) error {
	fleets := g.fleets()
	s, err := fleets.Resolve(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := fleets.Down(ctx, s, func(r ledger.Removed) {
		if r.Err != nil {
			fmt.Fprintf(os.Stdout, "could not remove %s: %v\n", r.Entry.Describe(), r.Err)
			return
		}
		fmt.Fprintf(os.Stdout, "removed %s\n", r.Entry.Describe())
	})
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(os.Stdout, "fleet %s: nothing was left to remove (cleaned before?); forgotten\n", s.Name)
		return nil
	}
	fmt.Fprintf(os.Stdout, "fleet %s is down: removed %d resource(s)\n", s.Name, n)
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(time.Second).String() }

func joinPIDs(pids []int) string {
	if len(pids) == 0 {
		return "—"
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
