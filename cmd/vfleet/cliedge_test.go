package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/fleet"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/scenarios"
)

// Edges of the CLI: values its flags parse but it cannot use, arguments
// that look right and mean something else, and outcomes that must be told
// apart by their exit status.

// storeRuns records one run per scenario text, each with a few samples of
// one metric, and returns the CLI with them in its database: runs are
// numbered from 1 in the order given.
func storeRuns(t *testing.T, texts ...string) *cli {
	t.Helper()
	runs := make([]storedRun, len(texts))
	for i, text := range texts {
		runs[i] = storedRun{text: text, status: store.StatusRunning, values: []float64{100, 101, 99}}
	}
	return storeRunsOf(t, runs...)
}

// storedRun is a run for storeRunsOf: its scenario text (the name on its
// first line), the machine it ran on, how it ended and the values of its
// one metric (the host's cpu events_per_sec).
type storedRun struct {
	text, machine, status string
	values                []float64
}

// storeRunsOf records the runs and returns the CLI with them in its
// database, numbered from 1 in the order given.
func storeRunsOf(t *testing.T, runs ...storedRun) *cli {
	t.Helper()
	c := newCLI(t)
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, r := range runs {
		name := strings.TrimPrefix(strings.SplitN(r.text, "\n", 2)[0], "name: ")
		id, err := st.CreateRun(ctx, &store.Run{ScenarioName: name, ScenarioText: []byte(r.text), Baseline: "host", Started: time.Now(),
			Host: hostinfo.Fingerprint{Hostname: r.machine}})
		if err != nil {
			t.Fatal(err)
		}
		var samples []store.Sample
		for rep, v := range r.values {
			samples = append(samples, store.Sample{Guest: "host", Group: "host", WorkloadID: "cpu", Workload: "cpu",
				Repetition: rep + 1, Metric: "events_per_sec", Unit: "events/s", Value: v, Better: "higher", At: time.Now()})
		}
		if err := st.AddSamples(ctx, id, samples); err != nil {
			t.Fatal(err)
		}
		if r.status != store.StatusRunning {
			if err := st.FinishRun(ctx, id, r.status, "", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

const (
	quickText   = "name: quick\nrepetitions: 3\n"
	quickEdited = "name: quick\nrepetitions: 5\n"
	otherText   = "name: other\nrepetitions: 3\n"
)

func TestCompareRefusesUnusableAlphaAndNoiseFloor(t *testing.T) {
	c := storeRuns(t, quickText, quickText)
	if _, stderr, code := c.run("compare", "1", "2"); code != 0 {
		t.Fatalf("the runs must compare with the default options: exit %d: %s", code, stderr)
	}
	const alpha, floor = "strictly between 0 and 1", "want a fraction ≥ 0 and below 1"
	for _, tc := range []struct {
		flag, want string
	}{
		{"--alpha=NaN", alpha},
		{"--alpha=Inf", alpha},
		{"--alpha=-Inf", alpha},
		{"--alpha=0", alpha},
		{"--alpha=1", alpha},
		{"--max-repetitions=1", "--max-repetitions 1: want 2 to 1000"},
		{"--max-repetitions=1001", "want 2 to 1000"},
		{"--noise-floor=Inf", floor},
		{"--noise-floor=NaN", floor},
		{"--noise-floor=-0.01", floor},
		{"--noise-floor=1", floor},
		{"--noise-floor=1e308", floor},
	} {
		_, stderr, code := c.run("compare", "1", "2", tc.flag)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("compare %s: exit %d, stderr %q; want exit 2 and %q", tc.flag, code, stderr, tc.want)
		}
	}
	for _, flags := range [][]string{{"--alpha=0.5", "--noise-floor=0"}, {"--alpha=1e-6", "--max-repetitions=2"}, {"--noise-floor=0.99"}} {
		if _, stderr, code := c.run(append([]string{"compare", "1", "2"}, flags...)...); code != 0 {
			t.Errorf("compare %v is allowed: exit %d: %s", flags, code, stderr)
		}
	}
}

func TestCompareRefusesARunWithItself(t *testing.T) {
	c := storeRuns(t, quickText, quickText)
	for _, args := range [][]string{{"1", "1"}, {"latest", "2"}, {"2", "latest"}} {
		_, stderr, code := c.run(append([]string{"compare"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "the same run") {
			t.Errorf("compare %v: exit %d, stderr %q; want exit 2 and the same run named", args, code, stderr)
		}
	}
	if _, stderr, code := c.run("compare", "latest", "1"); code != 0 {
		t.Errorf("compare latest 1: exit %d: %s", code, stderr)
	}
}

func TestCompareWarnsWhenTheScenariosDiffer(t *testing.T) {
	c := storeRuns(t, quickText, quickText, quickEdited, otherText)
	for _, tc := range []struct {
		a, b string
		want []string // on stderr; none: stderr must be empty
	}{
		{"1", "2", nil},
		{"1", "3", []string{"warning", "scenario quick changed between run 1 and run 3"}},
		{"1", "4", []string{"warning", "run 1 is of scenario quick and run 4 of scenario other"}},
		{"4", "2", []string{"warning", "run 4 is of scenario other and run 2 of scenario quick"}},
	} {
		stdout, stderr, code := c.run("compare", tc.a, tc.b)
		if code != 0 || !strings.Contains(stdout, "events_per_sec") {
			t.Errorf("compare %s %s: exit %d, stdout %q, stderr %q; want the comparison made", tc.a, tc.b, code, stdout, stderr)
		}
		if tc.want == nil && stderr != "" {
			t.Errorf("compare %s %s of one scenario: stderr %q, want nothing", tc.a, tc.b, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("compare %s %s: stderr %q lacks %q", tc.a, tc.b, stderr, w)
			}
		}
	}
}

func TestMetricsExposureWarning(t *testing.T) {
	for addr, exposed := range map[string]bool{
		"127.0.0.1:9477":          false,
		"127.0.0.2:9477":          false,
		"[::1]:9477":              false,
		"[::ffff:127.0.0.1]:9477": false,
		"localhost:9477":          false,
		":9477":                   false, // bound to 127.0.0.1
		"9477":                    false,
		"0.0.0.0:9477":            true,
		"[::]:9477":               true,
		"192.168.1.20:9477":       true,
		"[2001:db8::1]:9477":      true,
		"metrics.example:9477":    true,
	} {
		w := metricsExposure(addr)
		if exposed != (w != "") {
			t.Errorf("metricsExposure(%q) = %q; want a warning: %v", addr, w, exposed)
		}
		if exposed && !strings.Contains(w, "beyond this host") {
			t.Errorf("metricsExposure(%q) = %q; want it to say the metrics leave the host", addr, w)
		}
	}
}

func TestServeWarnsWhenItsMetricsLeaveTheHost(t *testing.T) {
	c := storeRuns(t, quickText)
	for addr, warn := range map[string]bool{"127.0.0.1:0": false, "0.0.0.0:0": true} {
		cmd, w, _ := startServe(t, c, addr)
		// The warning comes before the serving line, so it has been read.
		if got := strings.Contains(w.String(), "beyond this host"); got != warn {
			t.Errorf("serve --metrics-addr %s: warned %v, want %v; stderr:\n%s", addr, got, warn, w)
		}
		if err := stopWith(t, cmd, syscall.SIGINT); err != nil {
			t.Fatalf("serve after Ctrl-C: %v\n%s", err, w)
		}
	}
}

func TestExecCommandStartsAfterTheGuestOrItsDashes(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		args []string
		want []string // nil: a usage error
		says []string // in the error
	}{
		{args: []string{"c-0", "--", "cat", "/etc/hostname"}, want: []string{"cat", "/etc/hostname"}},
		{args: []string{"c-0", "cat", "/etc/hostname"}, want: []string{"cat", "/etc/hostname"}},
		{args: []string{"c-0", "sh", "-c", "exit 3"}, want: []string{"sh", "-c", "exit 3"}},
		{args: []string{"c-0", "--", "git", "log", "--", "f"}, want: []string{"git", "log", "--", "f"}},
		{args: []string{"c-0", "--timeout", "5s", "--", "true"}, says: []string{`"--timeout"`, "flags go before GUEST", "after '--'"}},
		{args: []string{"c-0", "--fleet=x", "--", "true"}, says: []string{`"--fleet=x"`}},
		{args: []string{"c-0", "git", "log", "--", "f"}, want: []string{"git", "log", "--", "f"}},
		{args: []string{"c-0", "-" + long, "--", "true"}, says: []string{`"-` + long[:38] + `…"`}},
		{args: []string{"c-0"}, says: []string{"a guest and a command"}},
		{args: []string{"c-0", "--"}, says: []string{"a guest and a command"}},
		{args: nil, says: []string{"a guest and a command"}},
	} {
		got, err := execCommand(tc.args)
		if tc.want != nil {
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("execCommand(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
			}
			continue
		}
		if !errors.As(err, new(usageError)) {
			t.Errorf("execCommand(%q) = %q, %v; want a usage error", tc.args, got, err)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("execCommand(%q): %q lacks %q", tc.args, err, s)
			}
		}
		if strings.Contains(err.Error(), long[:41]) {
			t.Errorf("execCommand(%q): the offending word was not cut: %q", tc.args, err)
		}
	}

	// Through the CLI: refused as a usage error before any fleet is looked for.
	c := newCLI(t)
	_, stderr, code := c.run("fleet", "exec", "c-0", "--timeout", "5s", "--", "true")
	if code != 2 || !strings.Contains(stderr, "flags go before GUEST") {
		t.Errorf("fleet exec c-0 --timeout 5s -- true: exit %d, stderr %q; want exit 2 and the flags' place", code, stderr)
	}
}

// The agent counts a timeout in whole milliseconds: a shorter one would be
// none at all.
func TestExecRefusesATimeoutBelowAMillisecond(t *testing.T) {
	c := newCLI(t)
	for _, d := range []string{"999us", "0s"} {
		_, stderr, code := c.run("fleet", "exec", "--timeout", d, "c-0", "--", "true")
		if code != 2 || !strings.Contains(stderr, "want a duration of at least 1ms") {
			t.Errorf("fleet exec --timeout %s: exit %d, stderr %q; want exit 2 and the least allowed", d, code, stderr)
		}
	}
}

// Every mistake in how vfleet is called exits 2, whatever part of it was
// wrong: the command, a flag, or how many arguments.
func TestUsageErrorsExit2(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"nope"}, {"compare", "1"}, {"compare", "1", "2", "3"}, {"report"}, {"runs", "x"}, {"doctor", "x"}, {"doctor", "--peer", "root@198.18.0.2"},
		{"fleet", "nope"}, {"fleet", "down", "a", "b"}, {"image", "build", "x"}, {"scenarios", "x"}, {"runs", "--nope"},
	} {
		if _, stderr, code := c.run(args...); code != 2 {
			t.Errorf("vfleet %q: exit %d, stderr %q; want 2", args, code, stderr)
		}
	}
	if _, stderr, code := c.run("fleet", "dwn"); !strings.Contains(stderr, `did you mean "down"?`) {
		t.Errorf("vfleet fleet dwn: exit %d, stderr %q; want the command it is close to", code, stderr)
	}
	if stdout, stderr, code := c.run(); code != 0 || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("vfleet alone: exit %d, stderr %q; want its help", code, stderr)
	}
}

// A dedicated NIC and its remote peer serve one run at a time, held by
// the vfleet that started it: an A/B run and a long-lived fleet are
// refused before anything is looked at.
func TestRemotePeerRefusedOutsideOneRun(t *testing.T) {
	c := newCLI(t)
	s := c.scenario(`name: lab
network: {path: routed, uplink: lab0, peer: "ssh://root@198.18.0.2", peer_nic: eth1}
guests:
  - {name: host, kind: host}
  - {name: c, kind: container}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--ab", s, s}, "--ab: a dedicated NIC (network.uplink) serves one run at a time"},
		{[]string{"fleet", "up", s}, "a long-lived fleet cannot have a remote peer"},
	} {
		if _, stderr, code := c.run(tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("vfleet %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The built-in scenarios can be found without an error message: listed
// with what each measures, and named in the help.
func TestScenariosListsTheBuiltins(t *testing.T) {
	c := newCLI(t)
	stdout, stderr, code := c.run("scenarios")
	if code != 0 || stderr != "" {
		t.Fatalf("vfleet scenarios: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(scenarios.Names()) {
		t.Errorf("%d lines for %d built-ins:\n%s", len(lines), len(scenarios.Names()), stdout)
	}
	for _, l := range lines {
		if name, desc, _ := strings.Cut(l, " "); !slices.Contains(scenarios.Names(), name) || strings.TrimSpace(desc) == "" {
			t.Errorf("line %q: want a built-in's name and its description", l)
		}
	}
	help, _, _ := c.run("--help")
	for _, want := range []string{"VMs", "'vfleet scenarios'"} {
		if !strings.Contains(help, want) {
			t.Errorf("vfleet --help lacks %q:\n%s", want, help)
		}
	}
}

// fakeAgent listens at a new unix socket and gives each connection to
// serve, after the agent's hello; it returns the socket's path.
func fakeAgent(t *testing.T, serve func(conn net.Conn, r *bufio.Reader)) string {
	t.Helper()
	// A socket's path must fit in 108 bytes: a test's own TempDir may not.
	dir, err := os.MkdirTemp("", "vf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "a.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				hello, _ := json.Marshal(agent.Hello{V: agent.Version, AgentVersion: "fake"})
				if _, err := conn.Write(append(hello, '\n')); err != nil {
					return
				}
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return path
}

// reply answers the next request with r, its id filled in.
func reply(r agent.Reply) func(net.Conn, *bufio.Reader) {
	return func(conn net.Conn, rd *bufio.Reader) {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return
		}
		var req agent.Request
		if json.Unmarshal(line, &req) != nil {
			return
		}
		r.V, r.ID = agent.Version, req.ID
		b, _ := json.Marshal(r)
		conn.Write(append(b, '\n'))
	}
}

// deadGuestCases are agents that give no answer, each by a socket path.
func deadGuestCases(t *testing.T) map[string]string {
	dir, err := os.MkdirTemp("", "vf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	// The socket file stays, as when a guest died: connecting is refused.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	return map[string]string{
		"no socket":    filepath.Join(dir, "missing.sock"),
		"stale socket": stale,
		"hangs up before replying": fakeAgent(t, func(_ net.Conn, r *bufio.Reader) {
			r.ReadBytes('\n')
		}),
	}
}

// oneGuestFleet publishes a fleet "edge" whose guest c-0's agent is at
// addr, in a new state directory, as `fleet up` would leave it.
func oneGuestFleet(t *testing.T, addr string) *globalOptions {
	t.Helper()
	g := &globalOptions{stateDir: t.TempDir()}
	s := fleet.State{Name: "edge", RunID: 1, RunKey: "r1-000000", Scenario: "edge", Started: time.Now().UTC(),
		Guests: []fleet.Guest{{Name: "c-0", Group: "c", Kind: "container", AgentAddr: addr}}}
	if err := os.MkdirAll(filepath.Join(g.stateDir, "ledger", s.RunKey), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := g.fleets().Publish(s); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFleetExecIntoAGuestNotAnswering(t *testing.T) {
	for name, addr := range deadGuestCases(t) {
		g := oneGuestFleet(t, addr)
		code, err := g.fleets().Exec("", "c-0", []string{"true"}, time.Minute, io.Discard, io.Discard)
		var stderr bytes.Buffer
		code, err = execOutcome(&stderr, code, err)
		if code != exitNotAnswering || err != nil {
			t.Errorf("%s: exit %d, error %v; want %d", name, code, err, exitNotAnswering)
		}
		for _, want := range []string{"fleet edge", "guest c-0", "not answering", "vfleet fleet status edge"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: stderr %q lacks %q", name, &stderr, want)
			}
		}
	}

	// An agent that answers is not a dead guest, whatever it answers.
	for name, tc := range map[string]struct {
		reply agent.Reply
		code  int
		err   error
	}{
		"command exits 1":   {reply: agent.Reply{ExitCode: 1}, code: 1},
		"command exits 0":   {reply: agent.Reply{}, code: 0},
		"request refused":   {reply: agent.Reply{Error: "exec: no such file"}, err: agent.ErrRemote},
		"command timed out": {reply: agent.Reply{TimedOut: true}, code: 124},
	} {
		g := oneGuestFleet(t, fakeAgent(t, reply(tc.reply)))
		code, err := g.fleets().Exec("edge", "c-0", []string{"true"}, time.Minute, io.Discard, io.Discard)
		code, err = execOutcome(new(bytes.Buffer), code, err)
		if code != tc.code || !errors.Is(err, tc.err) {
			t.Errorf("%s: exit %d, error %v; want %d, %v", name, code, err, tc.code, tc.err)
		}
	}
}

// A fleet named wrongly, or not named where several are up, is a usage
// error (exit 2) whichever fleet command is given it.
func TestFleetNameMistakesExit2(t *testing.T) {
	testutil.RequiresRoot(t) // status, exec and down refuse to run without it
	c := newCLI(t)
	g := oneGuestFleet(t, filepath.Join(t.TempDir(), "none.sock"))
	if err := g.fleets().Publish(fleet.State{Name: "other", RunKey: "r2-000000"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "up", "default", "--name", "Bad"}, `fleet name "Bad" is not allowed`},
		{[]string{"fleet", "status", "x.y"}, `fleet name "x.y" is not allowed`},
		{[]string{"fleet", "down"}, "2 fleets are up (edge, other): name one"},
		{[]string{"fleet", "exec", "c-0", "--", "true"}, "2 fleets are up (edge, other): name one"},
	} {
		_, stderr, code := c.run(append([]string{"--state-dir", g.stateDir}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("vfleet %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestFleetExecExitStatusThroughTheCLI checks the status a script sees:
// 255 for a guest not answering, the command's own otherwise.
func TestFleetExecExitStatusThroughTheCLI(t *testing.T) {
	testutil.RequiresRoot(t) // exec refuses to run without it
	c := newCLI(t)
	for name, addr := range deadGuestCases(t) {
		g := oneGuestFleet(t, addr)
		_, stderr, code := c.run("--state-dir", g.stateDir, "fleet", "exec", "c-0", "--", "true")
		if code != 255 || !strings.Contains(stderr, "guest c-0 is not answering") {
			t.Errorf("%s: exit %d, stderr %q; want 255 and the guest not answering", name, code, stderr)
		}
	}
	g := oneGuestFleet(t, fakeAgent(t, reply(agent.Reply{ExitCode: 1, Stderr: []byte("failed\n")})))
	_, stderr, code := c.run("--state-dir", g.stateDir, "fleet", "exec", "c-0", "--", "false")
	if code != 1 || stderr != "failed\n" {
		t.Errorf("a command exiting 1: exit %d, stderr %q; want 1 and the command's own stderr", code, stderr)
	}
}
