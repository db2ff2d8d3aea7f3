package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/testutil"
)

// TestOnImagePushAgainstBuild times a run brought up on a fresh machine
// with the guest image pushed from this machine's cache against the same
// run with the image built there, side by side in one invocation: the
// figure behind --image's default (docs/many-machines.md). Opt-in, since
// the build fetches and unpacks a whole Debian system:
// VFLEET_ON_BENCH=1.
func TestOnImagePushAgainstBuild(t *testing.T) {
	if os.Getenv("VFLEET_ON_BENCH") == "" {
		t.Skip("a build of minutes; set VFLEET_ON_BENCH=1 to run it")
	}
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "runc", "runc")
	testutil.Image(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	c := newCLI(t)
	m := newMachines(t, 2)
	scenario := c.scenario(strings.Replace(onScenario, "%d", "1", 1))
	took := map[string]time.Duration{}
	for i, mode := range []string{"push", "build"} {
		began := time.Now()
		stdout, stderr, code := m.run(t, c, "run", scenario, "--html", "-", "--image", mode, "--on", m.r[i].URL)
		took[mode] = time.Since(began)
		if code != exitOK {
			t.Fatalf("--image %s: exit %d\n%s\n%s", mode, code, stdout, stderr)
		}
	}
	t.Logf("a run brought up on a fresh machine and back: image pushed %s, built there %s (%.1f×)",
		took["push"].Round(time.Second), took["build"].Round(time.Second), took["build"].Seconds()/took["push"].Seconds())
}
