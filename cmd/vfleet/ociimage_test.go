package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// A user's OCI image (not vfleet's: systemd as init, no agent) runs in
// containers and as a bare baseline beside the baseline on vfleet's image: a built-in workload, a
// command that sees the image's own environment and the guest's identity,
// and a built-in whose tool the image lacks, which fails naming both.
func TestUserOCIImageEndToEnd(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	f := testutil.Foreign(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(`name: user-image
repetitions: 1
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
  - {name: theirs, kind: container, image: `+f.Layout+`}
  - {name: archived, kind: container, image: `+f.DockerArchive+`}
  - {name: bare-theirs, kind: host, image: `+f.OCIArchive+`}
workloads:
  - workload: cpu
  - workload: ctxswitch
  - id: env
    workload: command
    params:
      argv: [sh, -c, 'getent hosts localhost "$(hostname)" >/dev/null && echo "score: ${FOREIGN_BENCH_SCORE:-0}"']
      metrics:
        - {name: score, unit: points, better: higher, regex: 'score: (\d+)'}
`), "--html", "-")
	if code != exitStepsFailed {
		t.Fatalf("exit %d, want %d (ctxswitch fails in the user's image):\n%s\n%s", code, exitStepsFailed, stdout, stderr)
	}
	if !strings.Contains(stderr, "stress-ng is not in image "+f.Layout) {
		t.Errorf("the missing tool is not named with its image:\n%s", stderr)
	}
	got := map[string]float64{}
	for _, s := range c.latestSamples() {
		got[s.Group+" "+s.Metric] = s.Value
	}
	for key, want := range map[string]float64{"host score": 0, "theirs score": 42, "archived score": 42, "bare-theirs score": 42} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for _, key := range []string{"host events_per_sec", "theirs events_per_sec", "archived events_per_sec", "host switch_ops_per_sec"} {
		if got[key] <= 0 {
			t.Errorf("%s missing: %v", key, got)
		}
	}
	stdout, _, code = c.run("image", "inspect", f.OCIArchive)
	if code != 0 || !regexp.MustCompile(`(?m)^cpu +sysbench +/usr/bin/sysbench$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^ctxswitch +stress-ng +no`).MatchString(stdout) {
		t.Errorf("image inspect (exit %d):\n%s", code, stdout)
	}
	_, stderr, code = c.run("run", c.scenario("name: bad\nguests:\n  - {kind: host}\n  - {kind: container, image: "+t.TempDir()+"}\nworkloads:\n  - workload: cpu\n"))
	if code != 2 || !strings.Contains(stderr, "s.yaml:4:30: guests[1].image: not a usable OCI image") {
		t.Errorf("a directory that is no image: exit %d\n%s", code, stderr)
	}
}
