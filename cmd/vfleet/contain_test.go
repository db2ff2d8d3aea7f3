package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// daemonize is a shell command that starts `sleep ID` as a daemon (its own
// session, its parent gone at once): nothing but its cgroup ties it to the
// guest that started it.
func daemonize(id string) string {
	return `setsid sh -c "sleep ` + id + `" >/dev/null 2>&1 </dev/null &`
}

// awaitDaemon says whether `sleep ID` runs within a minute: the command
// that started it in the background may return before it has exec'd.
func awaitDaemon(t *testing.T, id string) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(testutil.RunningWithArgs(t, "sleep", id)) == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// latestRun is the latest run in c's database as stored.
func (c *cli) latestRun() store.Run {
	c.t.Helper()
	st, err := store.OpenReadOnly(c.db)
	if err != nil {
		c.t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	id, err := st.ResolveRun(ctx, "latest")
	if err != nil {
		c.t.Fatal(err)
	}
	r, err := st.GetRun(ctx, id)
	if err != nil {
		c.t.Fatalf("latest run %d: %v", id, err)
	}
	return r
}

// latestRunKey is the key of the latest run in c's database: it names the
// run's ledger and cgroups.
func (c *cli) latestRunKey() string {
	c.t.Helper()
	r := c.latestRun()
	if r.Key == "" {
		c.t.Fatalf("latest run %d: no key", r.ID)
	}
	return r.Key
}

// requireNothingRunning fails the test for any process still in the run's
// cgroups, and, a cross-check, for any `sleep ID` still running.
func requireNothingRunning(t *testing.T, when, runKey string, sleeps ...string) {
	t.Helper()
	if left := testutil.Outliving(func() []string { return testutil.RunningIn(t, cgroup.PathOf(runKey, "")) }); len(left) > 0 {
		t.Errorf("%s: still running in the run's cgroups: %v", when, left)
	}
	for _, id := range sleeps {
		if pids := testutil.Outliving(func() []int { return testutil.RunningWithArgs(t, "sleep", id) }); len(pids) > 0 {
			t.Errorf("%s: sleep %s still running: pids %v", when, id, pids)
		}
	}
}

// A tool that daemonizes in the baseline, and a server on the peer that
// starts a daemon, end with the run.
func TestDaemonsEndWithTheRun(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(`name: daemons
repetitions: 1
warmup: 0
duration: 1s
network: {path: bridge}
guests:
  - {name: bare, kind: host}
workloads:
  - id: daemon
    workload: command
    params:
      argv: [sh, -c, '`+daemonize("3171")+` echo val 1']
      metrics:
        - {name: val, unit: n, better: higher, regex: 'val ([0-9]+)'}
  - id: served
    workload: net-command
    params:
      server: [sh, -c, '`+daemonize("3172")+` exec iperf3 -s -p {port}']
      argv: [iperf3, -c, "{peer}", -p, "{port}", -t, "{duration}", -J]
      metrics:
        - {name: received_bps, unit: bit/s, better: higher, json: $.end.sum_received.bits_per_second}
`), "--html", "-")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	got := map[string]int{}
	for _, s := range c.latestSamples() {
		got[s.WorkloadID+" "+s.Metric]++
	}
	if got["daemon val"] != 1 || got["served received_bps"] != 1 {
		t.Fatalf("samples %v: the daemonizing steps did not run", got)
	}
	requireNothingRunning(t, "after the run", c.latestRunKey(), "3171", "3172")
}

// A daemon started through `fleet exec` goes with `fleet down`.
func TestFleetExecDaemonEndsWithDown(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	c := newCLI(t)
	s := upFleet(t, c, `name: fleetdaemon
guests:
  - {name: bare, kind: host}
workloads:
  - workload: cpu
`, "itest-daemon")
	if _, stderr, code := c.run("fleet", "exec", "bare", "--", "sh", "-c", daemonize("3175")); code != 0 {
		t.Fatalf("fleet exec: exit %d: %s", code, stderr)
	}
	if !awaitDaemon(t, "3175") {
		t.Fatal("the daemon is not running after fleet exec (the test must be able to fail)")
	}
	stdout, stderr, code := c.run("fleet", "down", "itest-daemon")
	if code != 0 || !strings.Contains(stdout, "removed cgroup "+cgroup.PathOf(s.RunKey, "bare")) {
		t.Fatalf("fleet down: exit %d\n%s\n%s", code, stdout, stderr)
	}
	requireNothingRunning(t, "after fleet down", s.RunKey, "3175")
}

// After vfleet is killed, its workload's daemons outlive it, reparented to
// init (the bare baseline's) or inside a container that outlives vfleet
// itself (an LXC one), until `vfleet clean` kills the guest's cgroup.
func TestCleanAfterKillEndsDaemons(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	for kind, sleep := range map[string]string{"host": "3177", "lxc": "3178"} {
		t.Run(kind, func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			defer testutil.CheckLeaks(t, before)
			c := newCLI(t)
			cmd, _ := startRun(t, c, c.scenario(`name: killed
baseline: bare
repetitions: 1
warmup: 0
guests:
  - {name: bare, kind: `+kind+`}
workloads:
  - id: daemon
    workload: command
    params:
      argv: [sh, -c, '`+daemonize(sleep)+` echo measuring; sleep 60; echo val 1']
      metrics:
        - {name: val, unit: n, better: higher, regex: 'val ([0-9]+)'}
`), "measure:")
			key := c.latestRunKey()
			if !awaitDaemon(t, sleep) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("the daemon never started")
			}
			cmd.Process.Kill()
			cmd.Wait()
			if len(testutil.RunningWithArgs(t, "sleep", sleep)) != 1 {
				t.Fatal("the daemon did not outlive the killed vfleet (the test must be able to fail)")
			}
			stdout, stderr, code := c.run("clean")
			if code != 0 || !strings.Contains(stdout, "removed cgroup "+cgroup.PathOf(key, "bare")) {
				t.Fatalf("clean: exit %d\n%s\n%s", code, stdout, stderr)
			}
			requireNothingRunning(t, "after SIGKILL and clean", key, sleep)
		})
	}
}
