package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/interrupt"
	"github.com/vfleet/vfleet/internal/remoterun"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/telemetry"
	"github.com/vfleet/vfleet/internal/testutil"
)

// onScenario is short on purpose: the default scenario's VMs take many
// minutes under TCG. Its host and container guests are what every
// machine runs.
const onScenario = `name: on-quick
repetitions: %d
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
  - {name: container, kind: container, runtime: runc}
workloads:
  - workload: cpu
`

// machines are test machines reached as a user reaches several: one SSH
// agent holding every machine's key, one known_hosts file for all.
type machines struct {
	r          []*testutil.Remote
	knownHosts string
	env        []string
}

func newMachines(t *testing.T, n int) *machines {
	t.Helper()
	m := &machines{}
	var keys []any
	var known []byte
	for range n {
		r := testutil.RemoteMachine(t)
		m.r = append(m.r, r)
		raw, err := os.ReadFile(r.Identity)
		if err != nil {
			t.Fatal(err)
		}
		key, err := ssh.ParseRawPrivateKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		b, err := os.ReadFile(r.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		known = append(known, b...)
	}
	dir := t.TempDir()
	m.knownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(m.knownHosts, known, 0o600); err != nil {
		t.Fatal(err)
	}
	m.env = []string{"SSH_AUTH_SOCK=" + testutil.ServeSSHAgent(t, filepath.Join(dir, "agent.sock"), keys...)}
	return m
}

func (m *machines) command(c *cli, args ...string) *exec.Cmd {
	cmd := c.command(append(args, "--on-known-hosts", m.knownHosts)...)
	cmd.Env = append(cmd.Env, m.env...)
	return cmd
}

func (m *machines) run(t *testing.T, c *cli, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := m.command(c, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// start starts vfleet with args and returns once a machine's progress
// shows a line containing marker.
func (m *machines) start(t *testing.T, c *cli, marker string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := m.command(c, args...)
	startUntil(t, cmd, marker, 5*time.Minute, func(line string) { t.Log(line) })
	return cmd
}

// requireInterruptedBack interrupts cmd, a vfleet measuring on the
// machine at url, as Ctrl-C does, and fails unless it exits as
// interrupted and the run it was measuring came back incomplete with the
// samples it had.
func requireInterruptedBack(t *testing.T, c *cli, cmd *exec.Cmd, url string) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("interrupted: %v; want exit %d", err, exitInterrupted)
	}
	var back *returnedRun
	for _, r := range runsOf(t, c) {
		if r.Origin == url && r.Status == store.StatusIncomplete {
			back = &r
		}
	}
	if back == nil || back.Samples == 0 {
		t.Errorf("the interrupted run did not come back as incomplete with its samples: %+v", back)
	}
}

// requireMachineClean fails unless the machine holds nothing of vfleet's
// but what the next run reuses (binaries, images), and no vfleet runs
// there.
func requireMachineClean(t *testing.T, r *testutil.Remote, when string) {
	t.Helper()
	dir := filepath.Join(r.WorkDir, "vfleet-remote")
	for _, sub := range []string{"runs", "state/runs", "state/ledger"} {
		if entries, _ := os.ReadDir(filepath.Join(dir, sub)); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s: the machine's %s holds %v", when, sub, names)
		}
	}
	images, _ := os.ReadDir(filepath.Join(dir, "state", "images"))
	for _, e := range images {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s: the machine's image cache holds %s", when, e.Name())
		}
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Errorf("%s: vfleet still runs on the machine: pids %v", when, pids)
	}
}

// processesUnder lists the running processes whose executable is in dir.
func processesUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// returnedRun is a run of the local store with its count of samples.
type returnedRun struct {
	store.Run
	Samples int
}

// runsOf are the runs of the local store, by id.
func runsOf(t *testing.T, c *cli) map[int64]returnedRun {
	t.Helper()
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]returnedRun{}
	for _, r := range runs {
		full, err := st.GetRun(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[r.ID] = returnedRun{full, r.Samples}
	}
	return out
}

// TestRunOn runs a scenario on two machines at once (--parallel) with a
// third that cannot be reached, then interrupts a run on one and kills the vfleet of
// a run on the other, and finds nothing left on either.
func TestRunOn(t *testing.T) {
	// Its leak check counts its runs (their keys) and what its machines
	// leave; the machines themselves go with the test.
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "runc", "runc")
	// The machines get the tests' cached image pushed: never a build.
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("machines", func(t *testing.T) {
		m := newMachines(t, 2)
		a, b := m.r[0], m.r[1]
		// sshd's address, a port where nothing listens: refused at once,
		// and no packet leaves the machine's namespaces.
		unreachable := "ssh://root@" + a.Addr.Addr().String() + ":2222"
		scenario := c.scenario(strings.Replace(onScenario, "%d", "1", 1))

		t.Run("two and an unreachable one", func(t *testing.T) {
			stdout, stderr, code := m.run(t, c, "run", scenario, "--html", "-", "--image", "push", "--parallel", "--on", a.URL+","+unreachable, "--on", b.URL)
			t.Logf("exit %d\n%s\n%s", code, stdout, stderr)
			if code != exitFailed {
				t.Errorf("exit %d; want %d: one machine failed", code, exitFailed)
			}
			if !strings.Contains(stderr, "their runs must not share a network under test") {
				t.Errorf("--parallel without its warning")
			}
			bad := strings.TrimPrefix(unreachable, "ssh://")
			if !strings.Contains(stderr, "1 of 3 machines failed: "+bad) || !strings.Contains(stdout, bad) || !strings.Contains(stdout, "connect to "+unreachable) {
				t.Errorf("the unreachable machine is not named with why it failed")
			}
			for _, r := range []*testutil.Remote{a, b} {
				if !strings.Contains(stderr, "["+strings.TrimPrefix(r.URL, "ssh://")+"] ") {
					t.Errorf("no progress of %s", r.URL)
				}
			}
			runs := runsOf(t, c)
			origins := map[string]bool{}
			for _, r := range runs {
				origins[r.Origin] = true
				if r.Status != store.StatusComplete || r.Host.Hostname == "" {
					t.Errorf("run %d from %s: %s, host %+v; want complete with the machine's fingerprint", r.ID, r.Origin, r.Status, r.Host)
				}
			}
			if len(runs) != 2 || !origins[a.URL] || !origins[b.URL] {
				t.Errorf("runs back from %v; want one from each of %s and %s", origins, a.URL, b.URL)
			}
			requireAcross(t, c, runs)
			requireMachineClean(t, a, "after a run")
			requireMachineClean(t, b, "after a run")
		})

		t.Run("a scenario the machine refuses", func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, []byte(strings.NewReplacer("%d", "1", "workload: cpu", "workload: no-such-tool").Replace(onScenario)), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := m.run(t, c, "run", bad, "--html", "-", "--on", a.URL)
			t.Logf("exit %d\n%s\n%s", code, stdout, stderr)
			name := strings.TrimPrefix(a.URL, "ssh://")
			if code != exitFailed || !strings.Contains(stdout, "vfleet on "+name+" exited 2: vfleet: ") || !strings.Contains(stdout, "no-such-tool") {
				t.Errorf("exit %d; want %d, the summary with the machine's exit status and its vfleet's error", code, exitFailed)
			}
			requireMachineClean(t, a, "after a refused scenario")
		})

		long := c.scenario(strings.Replace(onScenario, "%d", "8", 1))
		t.Run("interrupted", func(t *testing.T) {
			cmd := m.start(t, c, "cpu on container (rep 1) ok", "run", long, "--html", "-", "--on", a.URL)
			requireInterruptedBack(t, c, cmd, a.URL)
			requireMachineClean(t, a, "after Ctrl-C")
		})

		t.Run("killed, then clean --on", func(t *testing.T) {
			cmd := m.start(t, c, "cpu on container (rep 1) ok", "run", long, "--html", "-", "--on", b.URL)
			cmd.Process.Kill()
			cmd.Wait()
			if entries, _ := os.ReadDir(filepath.Join(b.WorkDir, "vfleet-remote", "runs")); len(entries) == 0 {
				t.Fatal("a killed run should have left its scratch on the machine (the test must be able to fail)")
			}
			stdout, stderr, code := m.run(t, c, "clean", "--on", b.URL)
			t.Logf("clean --on: exit %d\n%s\n%s", code, stdout, stderr)
			if code != 0 {
				t.Errorf("clean --on: exit %d", code)
			}
			requireMachineClean(t, b, "after SIGKILL and clean --on")
		})
	})
	testutil.CheckLeaks(t, before)
}

// requireAcross renders the runs that came back side by side, as a user
// compares the machines, and fails unless every run is there under a
// label of its own with each of its groups.
func requireAcross(t *testing.T, c *cli, runs map[int64]returnedRun) {
	t.Helper()
	args := []string{"report", "--across"}
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		args = append(args, strconv.FormatInt(id, 10))
	}
	table, stderr, code := c.run(args...)
	t.Logf("vfleet %s: exit %d\n%s%s", strings.Join(args, " "), code, table, stderr)
	if code != 0 {
		t.Fatalf("report --across: exit %d", code)
	}
	out, stderr, code := c.run(append(args, "--format", "json")...)
	var across struct {
		Machines []struct {
			Label string `json:"label"`
			RunID int64  `json:"run_id"`
		} `json:"machines"`
	}
	if err := json.Unmarshal([]byte(out), &across); err != nil || code != 0 {
		t.Fatalf("report --across --format json: exit %d, %v: %s", code, err, stderr)
	}
	labels := map[string]bool{}
	for _, m := range across.Machines {
		labels[m.Label] = true
		// The legend, the index's header and the machine's own columns.
		if n := strings.Count(table, m.Label); n < 3 {
			t.Errorf("run %d's label %q is in the table %d times; want its legend, its index and its columns", m.RunID, m.Label, n)
		}
	}
	if len(across.Machines) != len(runs) || len(labels) != len(runs) {
		t.Errorf("machines %+v; want each of the %d runs under a label of its own", across.Machines, len(runs))
	}
	for _, r := range runs {
		if !strings.Contains(table, "measured on "+r.Origin) {
			t.Errorf("the table does not say run %d was measured on %s", r.ID, r.Origin)
		}
	}
	for _, group := range []string{"host", "container (runc"} {
		if n := strings.Count(table, group); n < 1+len(runs) {
			t.Errorf("group %s is in the table %d times; want it in the index and under each machine", group, n)
		}
	}
}

// TestCapacityOn searches on a machine: the search and each size's runs
// come back into the local store, the search naming the runs by their
// ids here, and nothing is left on the machine.
func TestCapacityOn(t *testing.T) {
	// Its leak check counts its runs (their keys) and what its machines
	// leave; the machines themselves go with the test.
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "runc", "runc")
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("machine", func(t *testing.T) {
		m := newMachines(t, 1)
		a := m.r[0]
		// Two sizes that both hold, whatever the machine's load: the search
		// ends at --max after one run of each.
		scenario := c.scenario(strings.Replace(capacityScenario, "%s", "1, 2", 1))
		out := filepath.Join(c.work, "search.json")
		stdout, stderr, code := m.run(t, c, "capacity", scenario, "--slo", "cpu.events_per_sec >= 1", "--json", out, "--html", "-", "--on", a.URL)
		t.Logf("exit %d\n%s\n%s", code, stdout, stderr)
		if code != exitHitMax || !strings.Contains(stdout, "every size up to") {
			t.Errorf("exit %d; want %d and the answer printed", code, exitHitMax)
		}
		if !strings.Contains(stderr, "["+strings.TrimPrefix(a.URL, "ssh://")+"] ") {
			t.Errorf("no progress of the machine")
		}
		var rec capacityJSON
		if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &rec) != nil {
			t.Fatalf("no search written to --json: %v", err)
		}
		if rec.ID != 1 || rec.Result.Outcome != "hit-max" || rec.Result.Answer != 2 || len(rec.Result.Points) != 2 {
			t.Errorf("search %+v; want search 1, hit-max at 2 after sizes 1 and 2", rec)
		}
		runs := runsOf(t, c)
		if len(runs) != rec.Result.Measurements {
			t.Errorf("%d runs back; the search made %d", len(runs), rec.Result.Measurements)
		}
		for _, p := range rec.Result.Points {
			for _, id := range p.Measurements {
				if r, ok := runs[id]; !ok || r.Origin != a.URL || r.Status != store.StatusComplete {
					t.Errorf("size %d names run %d: %+v; want a complete run here from %s", p.Size, id, r.Run, a.URL)
				}
			}
		}
		st, err := store.Open(c.db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if s, err := st.GetCapacitySearch(context.Background(), rec.ID); err != nil || s.Host.Hostname == "" || s.ScenarioName != "capacity" {
			t.Errorf("stored search: %+v, %v; want it with the machine's fingerprint", s, err)
		}
		requireMachineClean(t, a, "after a search")

		// Ctrl-C: the machine's search stops, its first size comes back
		// incomplete, and no search is stored.
		long := c.scenario(strings.NewReplacer("%s", "1, 2", "repetitions: 3", "repetitions: 8").Replace(capacityScenario))
		cmd := m.start(t, c, "cpu on 1 guests together (rep 1) ok", "capacity", long, "--slo", "cpu.events_per_sec >= 1", "--html", "-", "--on", a.URL)
		requireInterruptedBack(t, c, cmd, a.URL)
		if _, err := st.GetCapacitySearch(context.Background(), rec.ID+1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an interrupted search was stored: %v", err)
		}
		requireMachineClean(t, a, "after Ctrl-C")
	})
	testutil.CheckLeaks(t, before)
}

// What run --on and clean --on cannot use is refused before any machine
// is reached, as a usage error.
func TestOnRefusesBadInput(t *testing.T) {
	c := newCLI(t)
	const a = "ssh://root@198.18.0.2:22"
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		// An empty list or element would mean this machine.
		{[]string{"run", "--on", "", "default"}, `invalid argument "" for "--on" flag: an empty machine URL`},
		{[]string{"run", "--on", a + ",," + a, "default"}, "an empty machine URL"},
		{[]string{"run", "--on", a + ",", "default"}, "an empty machine URL"},
		{[]string{"clean", "--on", ""}, "an empty machine URL"},
		{[]string{"capacity", "default", "--on", " "}, "an empty machine URL"},
		{[]string{"doctor", "--peer", ""}, `invalid argument "" for "--peer" flag: an empty machine URL`},
		// Key files are checked before anything starts, never read from a
		// named pipe or a device.
		{[]string{"run", "--on", a, "--on-identity", fifo, "default"}, "--on-identity or --on-known-hosts: identity unusable: " + fifo + " is a named pipe"},
		{[]string{"clean", "--on", a, "--on-known-hosts", "/dev/zero"}, "known_hosts unusable: /dev/zero is a character device"},
		{[]string{"doctor", "--peer", "ssh://root@127.0.0.1:2", "--peer-identity", "/dev/zero"}, "--peer-identity or --peer-known-hosts: identity unusable: /dev/zero is a character device"},
		{[]string{"doctor", "--peer", "ssh://root@127.0.0.1:2", "--peer-known-hosts", fifo}, "known_hosts unusable: " + fifo + " is a named pipe"},
		{[]string{"run", "--on", "root@198.18.0.2"}, "--on: bad peer URL"},
		{[]string{"run", "--on", a + "," + a}, "--on: " + a + " given twice"},
		{[]string{"run", "--on", a, "--image", "copy"}, `--image "copy": want push or build`},
		{[]string{"run", "--on", a, "no-such-scenario"}, `scenario "no-such-scenario": no such file, and no built-in scenario`},
		{[]string{"run", "--ab", "default", "default", "--on", a}, "--ab and --on do not go together"},
		{[]string{"run", "--parallel"}, "--image and --parallel go with --on"},
		{[]string{"run", "--on", a, "--metrics-addr", "127.0.0.1:0"}, "not with --on"},
		{[]string{"clean", "--on", a, "--force"}, "not with --on"},
		{[]string{"capacity", "default", "--parallel"}, "--image and --parallel go with --on"},
		{[]string{"capacity", "default", "--on", a, "--image", "copy"}, `--image "copy": want push or build`},
		{[]string{"capacity", "default", "--on", a}, "give at least one --slo"},
		{[]string{"capacity", "default", "--on", a, "--slo", "cpu.events_per_sec >= 1"}, "fleet.scale: missing"},
	} {
		_, stderr, code := c.run(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// The end of a run's input is its Ctrl-C, when asked: how a run on
// another machine is stopped, sshd passing no signal to root's session.
func TestInterruptibleStopsAtEOF(t *testing.T) {
	ctx, cancel := interruptible(telemetry.NewProgress(io.Discard, false), strings.NewReader(""))
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the input ended and the run goes on")
	}
	var s interrupt.Signalled
	if !errors.As(context.Cause(ctx), &s) || s.Signal != syscall.SIGINT || !interrupted(ctx.Err()) {
		t.Errorf("cause %v; want SIGINT, an interruption", context.Cause(ctx))
	}
}

// A machine gets the binaries built for its architecture; one that has
// none here fails saying what to build.
func TestBinariesFor(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "vfleet")
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[image.HostArch]
	for _, name := range []string{"vfleet", "vfleet-agent", "vfleet-agent-" + other} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin, agent, err := binariesFor(self, "", image.HostArch)
	if err != nil || bin != self || agent != filepath.Join(dir, "vfleet-agent") {
		t.Errorf("this machine's architecture: %s, %s, %v; want this vfleet and its agent", bin, agent, err)
	}
	_, _, err = binariesFor(self, "", other)
	if !errors.Is(err, remoterun.ErrNoBinary) || !strings.Contains(err.Error(), filepath.Join(dir, "vfleet-"+other)+" not found") || !strings.Contains(err.Error(), "scripts/build.sh") {
		t.Errorf("no vfleet-%s: %v; want ErrNoBinary naming the file and how to build it", other, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vfleet-"+other), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, agent, err = binariesFor(self, "", other)
	if err != nil || bin != filepath.Join(dir, "vfleet-"+other) || agent != filepath.Join(dir, "vfleet-agent-"+other) {
		t.Errorf("%s: %s, %s, %v; want vfleet-%s and vfleet-agent-%s", other, bin, agent, err, other, other)
	}
}
