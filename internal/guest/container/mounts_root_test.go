package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

// A running container's overlay is in its own mount namespace only: the
// host's mount table stays as it was however many run (every runtime's
// start reads it whole), while the container still writes through its
// overlay into its upper layer on the host's disk. Its ledger entry
// names its cgroup, through which an undo kills it.
func TestRunningContainersLeaveTheHostsMountTable(t *testing.T) {
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	env := runEnv(t, "mounts-test", img)
	led, stateDir := env.Ledger, env.StateDir
	ctx := context.Background()
	for _, name := range []string{"m1", "m2"} {
		own := env
		own.Ledger = led.Scoped(name)
		g, err := kind{}.New(guest.Spec{Name: name, Kind: KindName}, own)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer g.Stop(ctx)
		reply, err := g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "echo " + name + " >/written && cat /written"}, TimeoutMS: 10000})
		if err != nil || !reply.Succeeded() || strings.TrimSpace(string(reply.Stdout)) != name {
			t.Fatalf("%s: write through the overlay: %v, %+v", name, err, reply)
		}
		if b, err := os.ReadFile(filepath.Join(stateDir, name, "upper", "written")); err != nil || strings.TrimSpace(string(b)) != name {
			t.Errorf("%s: the upper layer on the host holds %q, %v", name, b, err)
		}
	}
	points, err := testutil.MountPoints("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		if strings.HasPrefix(p, stateDir) {
			t.Errorf("the host's mount table holds %s while its container runs", p)
		}
	}
	var containers int
	for _, e := range led.Pending() {
		if e.Kind == kindContainer {
			containers++
			if e.Data["cgroup"] == "" {
				t.Errorf("container entry %s names no cgroup: %v", e.ID, e.Data)
			}
		}
	}
	if containers != 2 {
		t.Errorf("%d container entries pending, want 2", containers)
	}
}

// runEnv is what a run gives its guests: a state directory and a ledger
// of the test's own, closed when it ends.
func runEnv(t *testing.T, runID string, img *image.Image) guest.Env {
	t.Helper()
	stateDir := filepath.Join(t.TempDir(), "state")
	led, err := ledger.Create(filepath.Join(t.TempDir(), "ledger"), runID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return guest.Env{RunID: runID, RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: stateDir, Ledger: led}
}
