package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// failingScenario has a step that fails while it runs: stress-ng's stream
// buffers do not fit in a 16 MiB container, and it reports no rates.
const failingScenario = `name: soak-fail
repetitions: 1
warmup: 0
guests:
  - {name: c, kind: container, memory: 16MiB}
baseline: c
workloads:
  - {workload: memory, duration: 8s}
`

// TestSoak runs VFLEET_SOAK small runs one after another (make soak),
// cycling through a run that succeeds, one with a failing step, one
// interrupted with SIGINT and one killed with SIGKILL and cleaned up, and
// counts after each what was left: namespaces, links, mounts, cgroups,
// running processes, containers, ledgers and runs still marked running.
// It is a benchmark of robustness, too long for CI.
func TestSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VFLEET_SOAK"))
	if n <= 0 {
		t.Skip("set VFLEET_SOAK=N to run N runs (make soak)")
	}
	testutil.RequiresRoot(t)
	testutil.Image(t)
	c := newCLI(t)
	ok := filepath.Join(c.work, "ok.yaml")
	fail := filepath.Join(c.work, "fail.yaml")
	for p, text := range map[string]string{ok: reps(1), fail: failingScenario} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ledgers := func() int {
		entries, _ := os.ReadDir(filepath.Join(testutil.StateRoot(), "ledger"))
		return len(entries)
	}
	before, ledgersBefore := testutil.TakeSnapshot(t), ledgers()
	cases := []struct {
		name string
		want int
		do   func() int
	}{
		{"success", exitOK, func() int { _, _, code := c.run("run", ok, "--html", "-"); return code }},
		{"step failure", exitStepsFailed, func() int { _, _, code := c.run("run", fail, "--html", "-"); return code }},
		{"SIGINT", exitInterrupted, func() int {
			cmd, _ := startRun(t, c, ok, "measure:")
			cmd.Process.Signal(syscall.SIGINT)
			cmd.Wait()
			return cmd.ProcessState.ExitCode()
		}},
		{"SIGKILL + clean", exitOK, func() int {
			cmd, _ := startRun(t, c, ok, "measure:")
			cmd.Process.Kill()
			cmd.Wait()
			_, _, code := c.run("clean")
			return code
		}},
	}
	leaked := map[string]int{}
	codes := map[string]map[int]int{}
	began := time.Now()
	for i := range n {
		tc := cases[i%len(cases)]
		code := tc.do()
		if codes[tc.name] == nil {
			codes[tc.name] = map[int]int{}
		}
		codes[tc.name][code]++
		if code != tc.want {
			t.Errorf("run %d (%s): exit %d, want %d", i+1, tc.name, code, tc.want)
		}
		for _, l := range testutil.Leaks(t, before) {
			kind, _, _ := strings.Cut(l, " ")
			leaked[kind]++
			t.Errorf("after run %d (%s): left %s", i+1, tc.name, l)
		}
		if d := ledgers() - ledgersBefore; d > 0 {
			leaked["ledger"] += d
			t.Errorf("after run %d (%s): %d ledgers left", i+1, tc.name, d)
		}
		running := runningRuns(t, c.db)
		leaked["running run"] += running
		if running > 0 {
			t.Errorf("after run %d (%s): %d runs still marked running", i+1, tc.name, running)
		}
	}
	var lines []string
	for _, kind := range []string{"network", "link", "mount", "cgroup", "process", "runc", "ledger", "running run"} {
		lines = append(lines, fmt.Sprintf("%s %d", kind, leaked[kind]))
	}
	var outcomes []string
	for name, byCode := range codes {
		outcomes = append(outcomes, fmt.Sprintf("%s %v", name, byCode))
	}
	sort.Strings(outcomes)
	t.Logf("soak: %d runs in %s; exit codes by case: %s", n, time.Since(began).Round(time.Second), strings.Join(outcomes, "; "))
	t.Logf("soak: leaked after any run: %s", strings.Join(lines, ", "))
}

func runningRuns(t *testing.T, db string) int {
	st, err := store.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if r.Status == store.StatusRunning {
			n++
		}
	}
	return n
}
