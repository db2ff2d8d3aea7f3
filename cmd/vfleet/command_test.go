package main

import (
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// A user's own command runs in the baseline and a container: one that
// ends by itself, one that vfleet stops at the duration (its summary
// printed on SIGINT is what is measured), and one whose program the image
// lacks, which fails saying so while the rest of the run is measured.
func TestCommandWorkloadEndToEnd(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(`name: own-command
repetitions: 2
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
  - {name: container, kind: container}
workloads:
  - id: primes
    workload: command
    params:
      argv: [sysbench, cpu, "--time={duration}", run]
      metrics:
        - {name: events, unit: events/s, better: higher, regex: 'events per second:\s+([0-9.]+)'}
  - id: spin
    workload: command
    params:
      argv: [sh, -c, 'n=0; trap "echo spins: \$n; exit 0" INT; while :; do n=$((n+1)); done']
      stop: duration
      metrics:
        - {name: spins, unit: loops, better: higher, regex: 'spins: (\d+)'}
  - id: theirs
    workload: command
    params:
      argv: [no-such-bench, --quick]
      metrics:
        - {name: score, unit: score, better: higher, regex: 'Score (\d+)'}
`), "--html", "-")
	if code != exitStepsFailed || !strings.Contains(stderr, "no-such-bench is not in vfleet's image") {
		t.Fatalf("exit %d, want %d with the missing program named:\n%s\n%s", code, exitStepsFailed, stdout, stderr)
	}
	for _, want := range []string{"primes events ↑", "spin spins ↑"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	got := map[string]int{}
	for _, s := range c.latestSamples() {
		if s.Value <= 0 {
			t.Errorf("sample %+v", s)
		}
		got[s.Group+" "+s.Metric]++
	}
	for _, key := range []string{"host events", "container events", "host spins", "container spins"} {
		if got[key] != 2 {
			t.Errorf("%s: %d samples, want 2 (all: %v)", key, got[key], got)
		}
	}
}
