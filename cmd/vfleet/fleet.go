package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vfleet/vfleet/internal/procfs"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
)

// agentPingTimeout bounds each guest's check in `fleet status`: a live
// agent answers in milliseconds, and a dead guest must not stall the table.
const agentPingTimeout = 2 * time.Second

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
			return fleetUp(g, args[0], name)
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
			return fleetStatus(cmd.Context(), g, name)
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
			code, err := fleetExec(g, fleetName, args[0], command, timeout)
			if code, err = execOutcome(os.Stderr, code, err); err != nil {
				return err
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
			return fleetDown(g, name)
		},
	}
}

func fleetUp(g *globalOptions, ref, name string) error {
	spec, err := scenario.Load(ref, scenarioOptions(g))
	if err != nil {
		return err
	}
	if name == "" {
		name = spec.Name
	}
	if err := checkFleetName(name); err != nil {
		return usageError{err}
	}
	if err := requireRoot("vfleet fleet up"); err != nil {
		return err
	}
	fleets := fleetsDir(g.stateDir)
	if old, err := readFleet(fleets, name); err == nil {
		if !fleetGone(g.stateDir, old.RunKey) {
			return fmt.Errorf("fleet %s is already up (run %d, since %s): take it down with 'vfleet fleet down %s', or give this one another --name",
				name, old.RunID, old.Started.Local().Format(time.DateTime), name)
		}
		forgetFleet(context.Background(), fleets, old)
	} else if !errors.As(err, new(noFleetError)) {
		return err
	}
	db, err := filepath.Abs(g.db())
	if err != nil {
		return err
	}

	progress := newProgress()
	ctx, cancel := signalContext(progress)
	defer cancel()
	sess, err := session.Prepare(ctx, g.session(progress), spec)
	if err != nil {
		return err
	}
	st, err := store.Open(db)
	if err != nil {
		return err
	}
	defer st.Close()
	opts := sess.Options(ctx, st)

	plan := spec.Expand()
	watch := &launchWatch{pids: map[string][]int{}}
	progress.Logf("fleet %s: scenario %s, %d guests; run recorded in %s", name, spec.Name, len(plan.Guests), db)
	began := time.Now()
	opts.Observer = watch
	id, key, err := runner.Launch(ctx, plan, opts)
	launchTime := time.Since(began)
	progress.Done()
	if err != nil {
		if interrupted(err) && (key == "" || fleetGone(g.stateDir, key)) {
			return errors.New("interrupted; everything the fleet had started was torn down")
		}
		return fmt.Errorf("fleet %s: %w", name, err)
	}
	// From here the guests run detached: any failure must remove them, or
	// they would be up with no fleet to reach or take them down by.
	abort := func(cause error) error {
		progress.Logf("fleet %s: tearing down what was started", name)
		tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer tcancel()
		_, cerr := ledger.CleanRun(tctx, ledgerRoot(g.stateDir), key, ledger.CleanOptions{Force: true})
		ferr := st.FinishRun(tctx, id, store.StatusFailed, errors.Join(cause, cerr).Error(), time.Now().UTC())
		return errors.Join(cause, cerr, ferr)
	}
	if failed := watch.failedGuests(); len(failed) > 0 {
		return abort(fmt.Errorf("fleet %s: guest(s) %s did not start (see above)", name, strings.Join(failed, ", ")))
	}
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return abort(err)
	}
	state := fleetState{Name: name, RunID: id, RunKey: key, Scenario: spec.Name, Source: spec.Source, DB: db,
		Started: time.Now().UTC(), Guests: fleetGuests(plan, run.Guests, watch.pids)}
	if err := ctx.Err(); err != nil {
		return abort(errors.New("interrupted"))
	}
	if err := publishFleet(fleets, state); err != nil {
		return abort(err)
	}

	fmt.Fprintf(os.Stdout, "fleet %s is up: %d guests (run %d), launched in %s\n", name, len(state.Guests), id, launchTime.Round(10*time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GUEST\tGROUP\tKIND\tPIDS\tBOOT")
	for _, gs := range state.Guests {
		boot := "—"
		if rec, ok := run.Guests[gs.Name]; ok && rec.BootNS > 0 {
			boot = time.Duration(rec.BootNS).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", gs.Name, gs.Group, gs.kindLabel(), joinPIDs(gs.PIDs), boot)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "run commands with 'vfleet fleet exec --fleet %s GUEST -- COMMAND'; remove it with 'vfleet fleet down %s'\n", name, name)
	return nil
}

// fleetGuests lists the fleet's guests in the plan's order, the network's
// peer last, as the stored records describe them.
func fleetGuests(plan *scenario.Plan, records map[string]store.GuestRecord, pids map[string][]int) []fleetGuest {
	names := make([]string, 0, len(plan.Guests)+1)
	for _, pg := range plan.Guests {
		names = append(names, pg.Spec.Name)
	}
	if _, ok := records[scenario.PeerName]; ok {
		names = append(names, scenario.PeerName)
	}
	var out []fleetGuest
	for _, n := range names {
		rec := records[n]
		// A VM's virtio-serial channel serves one client at a time: it is
		// free once `up`, whose client held it, has exited.
		addr := rec.Details["agent_addr"]
		if addr == "" {
			addr = rec.Details["agent_socket"]
		}
		out = append(out, fleetGuest{Name: n, Group: rec.Group, Kind: rec.Kind, Runtime: rec.Runtime, AgentAddr: addr, PIDs: pids[n]})
	}
	return out
}

// launchWatch learns from runner.Launch what the stored guest records
// lack: each guest's processes, and which guests failed to start.
type launchWatch struct {
	mu     sync.Mutex
	pids   map[string][]int
	failed []string
}

func (w *launchWatch) GuestStarting(runner.GuestEvent) func(runner.GuestEvent, error) {
	return func(e runner.GuestEvent, err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.failed = append(w.failed, e.Name)
			return
		}
		w.pids[e.Name] = e.PIDs
	}
}

func (w *launchWatch) failedGuests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	sort.Strings(w.failed)
	return w.failed
}

func (*launchWatch) RunStarted(runner.RunEvent)               {}
func (*launchWatch) StepStarted(runner.StepEvent) func(error) { return func(error) {} }
func (*launchWatch) SamplesStored(int64, []store.Sample)      {}
func (*launchWatch) TeardownStarted(int64) func(error)        { return func(error) {} }
func (*launchWatch) GuestStopped(runner.GuestEvent, error)    {}
func (*launchWatch) RunFinished(int64, string)                {}

func fleetStatus(ctx context.Context, g *globalOptions, name string) error {
	fleets := fleetsDir(g.stateDir)
	if name == "" {
		all, err := listFleets(fleets)
		if err != nil {
			return err
		}
		if len(all) != 1 {
			return listFleetTable(ctx, g.stateDir, all)
		}
		name = all[0].Name
	}
	s, err := readFleet(fleets, name)
	if err != nil {
		return err
	}
	if fleetGone(g.stateDir, s.RunKey) {
		forgetFleet(ctx, fleets, s)
		fmt.Fprintf(os.Stdout, "fleet %s is gone: its guests and resources were removed (by 'vfleet clean'?); forgotten\n", name)
		return nil
	}
	health := checkGuests(ctx, s.Guests)
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
			if h.agentErr != nil {
				agentCol = "NO ANSWER: " + h.agentErr.Error()
			} else {
				answering++
			}
		}
		pids := "—"
		if len(gs.PIDs) > 0 {
			var parts []string
			for j, pid := range gs.PIDs {
				state := "alive"
				if !h.alive[j] {
					state = "DEAD"
				}
				parts = append(parts, fmt.Sprintf("%d %s", pid, state))
			}
			pids = strings.Join(parts, ", ")
		}
		uptime := "—"
		if h.agentErr == nil && gs.AgentAddr != "" || h.anyAlive() {
			uptime = since(s.Started)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", gs.Name, gs.Group, gs.kindLabel(), agentCol, pids, uptime)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "%d of %d agents answer\n", answering, reachable)
	return nil
}

func listFleetTable(ctx context.Context, stateDir string, all []fleetState) error {
	if len(all) == 0 {
		fmt.Fprintln(os.Stdout, "no fleet is up; start one with 'vfleet fleet up SCENARIO'")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN\tSCENARIO\tGUESTS\tUP\tSTATE")
	for _, s := range all {
		state, up := "up", since(s.Started)
		if fleetGone(stateDir, s.RunKey) {
			forgetFleet(ctx, fleetsDir(stateDir), s)
			state, up = "gone (removed by 'vfleet clean'?); forgotten", "—"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", s.Name, s.RunID, s.Scenario, len(s.Guests), up, state)
	}
	return tw.Flush()
}

// guestHealth is what `fleet status` found about one guest.
type guestHealth struct {
	agentErr error
	alive    []bool // per PID
}

func (h guestHealth) anyAlive() bool {
	for _, a := range h.alive {
		if a {
			return true
		}
	}
	return false
}

// checkGuests pings every guest's agent at once, so a fleet of dead
// guests takes one timeout, not one per guest.
func checkGuests(ctx context.Context, guests []fleetGuest) []guestHealth {
	out := make([]guestHealth, len(guests))
	var wg sync.WaitGroup
	for i, gs := range guests {
		out[i].alive = make([]bool, len(gs.PIDs))
		for j, pid := range gs.PIDs {
			out[i].alive[j] = processRunning(pid)
		}
		if gs.AgentAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, agentPingTimeout)
			defer cancel()
			c, err := agent.Dial(pctx, gs.AgentAddr)
			if err == nil {
				err = c.Ping(pctx)
				c.Close()
			}
			out[i].agentErr = err
		}()
	}
	wg.Wait()
	return out
}

// processRunning says whether pid runs. A guest process outlives its `up`
// and is reparented; once dead it stays a zombie until its new parent
// reaps it, and a zombie is not running.
func processRunning(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Running()
}

func fleetExec(g *globalOptions, fleetName, guestName string, argv []string, timeout time.Duration) (int, error) {
	fleets := fleetsDir(g.stateDir)
	s, err := resolveFleet(fleets, fleetName)
	if err != nil {
		return 0, err
	}
	if fleetGone(g.stateDir, s.RunKey) {
		forgetFleet(context.Background(), fleets, s)
		return 0, fmt.Errorf("fleet %s is gone: its guests and resources were removed (by 'vfleet clean'?); forgotten", s.Name)
	}
	gs, err := s.guest(guestName)
	if err != nil {
		return 0, err
	}
	if gs.AgentAddr == "" {
		return 0, fmt.Errorf("fleet %s: guest %s has no agent to run commands through", s.Name, gs.Name)
	}
	// The agent kills the command at the timeout; the margin lets its
	// reply, with the output so far, arrive.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	client, err := agent.Dial(ctx, gs.AgentAddr)
	if err != nil {
		return 0, agentError(s.Name, gs.Name, err)
	}
	defer client.Close()
	reply, err := client.Do(ctx, agent.Request{Argv: argv, TimeoutMS: timeout.Milliseconds()})
	os.Stdout.Write(reply.Stdout)
	os.Stderr.Write(reply.Stderr)
	if err != nil {
		return 0, agentError(s.Name, gs.Name, err)
	}
	if cuts := reply.Cuts(); cuts != "" {
		fmt.Fprintf(os.Stderr, "vfleet: %s\n", cuts)
	}
	return exitStatus(reply, timeout), nil
}

// exitNotAnswering is exec's status when the guest's agent gives no
// answer: ssh's when it cannot reach the host, so that a script can tell a
// dead guest from a command that failed.
const exitNotAnswering = 255

// notAnsweringError: the guest's agent gave no answer at all.
type notAnsweringError struct {
	fleet, guest string
	err          error
}

func (e notAnsweringError) Error() string {
	return fmt.Sprintf("fleet %s: guest %s is not answering (%v); see 'vfleet fleet status %s'", e.fleet, e.guest, e.err, e.fleet)
}

func (e notAnsweringError) Unwrap() error { return e.err }

// agentError wraps an error from talking to a guest's agent, marking those
// where no answer came: nothing listens, or the connection broke or stalled
// before a reply. An answer vfleet could not use (another protocol
// version, a request the agent refused) is an error of another kind.
func agentError(fleet, guest string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) {
		return notAnsweringError{fleet: fleet, guest: guest, err: err}
	}
	return fmt.Errorf("fleet %s: guest %s: %w", fleet, guest, err)
}

// execOutcome turns fleetExec's result into exec's exit status: a guest
// not answering is told on w and gets exitNotAnswering; any other error is
// left to be reported as vfleet's own.
func execOutcome(w io.Writer, code int, err error) (int, error) {
	var na notAnsweringError
	if errors.As(err, &na) {
		fmt.Fprintf(w, "vfleet: %v\n", err)
		return exitNotAnswering, nil
	}
	return code, err
}

// exitStatus is the command's exit status as a shell would give it; a
// timeout is told on stderr and gives 124, as timeout(1) does.
func exitStatus(r agent.Reply, timeout time.Duration) int {
	switch {
	case r.TimedOut:
		fmt.Fprintf(os.Stderr, "vfleet: the command timed out after %s (--timeout) and was killed\n", timeout)
		return 124
	case r.Signal != "":
		fmt.Fprintf(os.Stderr, "vfleet: the command was ended by a signal (%s)\n", r.Signal)
		return 128 + signalNumber(r.Signal)
	default:
		return r.ExitCode
	}
}

// signalNumber maps a signal's name as the agent reports it (Go's
// description, "killed") back to its number; 0 when unknown.
func signalNumber(name string) int {
	for s := syscall.Signal(1); s < 65; s++ {
		if s.String() == name {
			return int(s)
		}
	}
	return 0
}

func fleetDown(g *globalOptions, name string) error {
	fleets := fleetsDir(g.stateDir)
	s, err := resolveFleet(fleets, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, failed := 0, 0
	_, err = ledger.CleanRun(ctx, ledgerRoot(g.stateDir), s.RunKey, ledger.CleanOptions{
		Progress: func(r ledger.Removed) {
			if r.Err != nil {
				failed++
				fmt.Fprintf(os.Stdout, "could not remove %s: %v\n", r.Entry.Describe(), r.Err)
				return
			}
			n++
			fmt.Fprintf(os.Stdout, "removed %s\n", r.Entry.Describe())
		},
	})
	if errors.Is(err, ledger.ErrOwnerAlive) {
		return fmt.Errorf("fleet %s is still starting (its 'vfleet fleet up' is running): stop that with Ctrl-C instead", s.Name)
	}
	if err != nil || failed > 0 {
		// The state file stays, so that another down can retry what failed.
		return errors.Join(fmt.Errorf("fleet %s: %d resource(s) could not be removed; run 'vfleet fleet down %s' again", s.Name, failed, s.Name), err)
	}
	forgetFleet(ctx, fleets, s)
	if n == 0 {
		fmt.Fprintf(os.Stdout, "fleet %s: nothing was left to remove (cleaned before?); forgotten\n", s.Name)
		return nil
	}
	fmt.Fprintf(os.Stdout, "fleet %s is down: removed %d resource(s)\n", s.Name, n)
	return nil
}

// forgetFleet ends a fleet whose resources are gone: its run, if still
// running, is marked complete where `up` recorded it, and its state file
// removed. The store is told on a best-effort basis: the fleet is gone
// either way.
func forgetFleet(ctx context.Context, fleets string, s fleetState) {
	if err := finishFleetRun(ctx, s); err != nil {
		fmt.Fprintf(os.Stderr, "vfleet: fleet %s: could not mark run %d complete: %v\n", s.Name, s.RunID, err)
	}
	if err := removeFleet(fleets, s.Name); err != nil {
		fmt.Fprintf(os.Stderr, "vfleet: fleet %s: %v\n", s.Name, err)
	}
}

func finishFleetRun(ctx context.Context, s fleetState) error {
	// Opening a missing database would create an empty one.
	if _, err := os.Stat(s.DB); err != nil {
		return err
	}
	st, err := store.Open(s.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.GetRun(ctx, s.RunID)
	if err != nil {
		return err
	}
	if r.Status != store.StatusRunning {
		// Ended already: `vfleet clean` marks aborted the fleet it removed,
		// and that is what happened to it.
		return nil
	}
	return st.FinishRun(ctx, s.RunID, store.StatusComplete, "", time.Now().UTC())
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
