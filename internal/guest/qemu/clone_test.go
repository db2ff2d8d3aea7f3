package qemu

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestClonesAreTheirOwnGuests resumes two clones of one template and
// checks that each took on its own name, clock and randomness, and that
// what they write, in memory and on disk, stays theirs.
func TestClonesAreTheirOwnGuests(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	k, _ := guest.Lookup(KindName)
	ctx := context.Background()
	var clones []guest.Guest
	runID := testutil.RunID(t)
	for _, name := range []string{"clone-a", "clone-b"} {
		g, err := k.New(guest.Spec{Name: name, Kind: KindName, Runtime: MachineMicroVM, Accel: AccelTCG, MemoryBytes: 128 << 20, Launch: LaunchClone},
			guest.Env{RunID: runID, RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer g.Stop(ctx)
		clones = append(clones, g)
		t.Logf("%s: ready in %s, %v", name, g.Info().BootTime, g.Info().Details)
	}
	tplDir := clones[0].Info().Details["template"]
	if tplDir == "" || tplDir != clones[1].Info().Details["template"] {
		t.Fatalf("clones of one shape on templates %q and %q", tplDir, clones[1].Info().Details["template"])
	}
	tplSums := sumFiles(t, tplDir)

	run := func(g guest.Guest, script string) string {
		t.Helper()
		r, err := g.Exec(ctx, agent.Request{Argv: []string{"/bin/sh", "-c", script}, TimeoutMS: 20000})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %q: %v exit %d %s", g.Spec().Name, script, err, r.ExitCode, r.Stderr)
		}
		return strings.TrimSpace(string(r.Stdout))
	}
	seen := map[string]string{}
	for _, g := range clones {
		name := g.Spec().Name
		if got := run(g, "hostname"); got != name {
			t.Errorf("%s calls itself %q", name, got)
		}
		random := run(g, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'")
		if other, dup := seen[random]; dup {
			t.Errorf("%s and %s drew the same random bytes %s: the template's generator state was not reseeded", other, name, random)
		}
		seen[random] = name
		secs, err := strconv.ParseInt(run(g, "date +%s"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if skew := time.Since(time.Unix(secs, 0)); skew < -5*time.Second || skew > 5*time.Second {
			t.Errorf("%s's clock is %s off the host's: it still has the template's", name, skew)
		}
		// Under TCG a TSC that the template's boot marked unstable left
		// every clone on jiffies, ticking even when idle.
		if cs := run(g, "cat /sys/devices/system/clocksource/clocksource0/current_clocksource"); cs != "tsc" && cs != "kvm-clock" {
			t.Errorf("%s keeps time with %s, want the TSC (or kvm-clock)", name, cs)
		}
		// Dirty guest memory (a tmpfs) and the disk, under the clone's name.
		run(g, "head -c 16m /dev/urandom > /dev/shm/"+name+" && dd if=/dev/urandom of=/var/tmp/"+name+" bs=1M count=4 conv=fsync 2>/dev/null")
	}
	// Neither clone sees what the other wrote: memory and disk are its own.
	for i, g := range clones {
		other := clones[1-i].Spec().Name
		if got := run(g, "ls /dev/shm /var/tmp"); strings.Contains(got, other) {
			t.Errorf("%s sees what %s wrote:\n%s", g.Spec().Name, other, got)
		}
	}
	for _, g := range clones {
		if err := g.Stop(ctx); err != nil {
			t.Error(err)
		}
	}
	if after := sumFiles(t, tplDir); after != tplSums {
		t.Errorf("the template's files changed under its clones:\nbefore %s\nafter  %s", tplSums, after)
	}
}

// sumFiles hashes a template's files.
func sumFiles(t *testing.T, dir string) string {
	t.Helper()
	var sums []string
	for _, name := range []string{templateRAM, templateDisk, templateState} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sums = append(sums, name+"="+string(h.Sum(nil)[:6]))
	}
	return strings.Join(sums, " ")
}
