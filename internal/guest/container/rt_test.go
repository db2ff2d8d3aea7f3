package container

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

func TestBundleGrantsRealTimeOnlyWhenAsked(t *testing.T) {
	plain := Bundle(BundleOptions{})
	if slices.Contains(plain.Process.Capabilities.Effective, "CAP_SYS_NICE") {
		t.Errorf("a plain container must not get real-time rights: %+v", plain.Process)
	}
	rt := Bundle(BundleOptions{RTPriority: 95, RTRuntimeUS: containerRTRuntimeUS})
	caps := rt.Process.Capabilities
	for _, c := range []string{"CAP_SYS_NICE", "CAP_IPC_LOCK"} {
		if !slices.Contains(caps.Effective, c) || !slices.Contains(caps.Bounding, c) || !slices.Contains(caps.Permitted, c) {
			t.Errorf("%s missing from %+v", c, caps)
		}
	}
	cpu := rt.Linux.Resources.CPU
	if cpu == nil || *cpu.RealtimeRuntime != containerRTRuntimeUS || *cpu.RealtimePeriod != rtPeriodUS {
		t.Errorf("cpu resources = %+v, want the container's real-time budget", cpu)
	}
	if v2 := Bundle(BundleOptions{RTPriority: 95}); v2.Linux.Resources.CPU != nil {
		t.Errorf("without group scheduling no budget is set: %+v", v2.Linux.Resources.CPU)
	}
	if defaultCaps[len(defaultCaps)-1] != "CAP_SYS_CHROOT" {
		t.Errorf("granting real time changed the shared default capability list: %v", defaultCaps)
	}
}

// A container given a real-time priority can really switch a thread to
// SCHED_FIFO: with a cgroup v1 budget on this kernel, or none under v2.
func TestRealTimeSchedulingInAContainer(t *testing.T) {
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	stateDir := filepath.Join(t.TempDir(), "state")
	led, err := ledger.Create(filepath.Join(t.TempDir(), "ledger"), "rt-test")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	env := guest.Env{RunID: "rt-test", RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: stateDir, Ledger: led}
	for _, prio := range []int{0, 50} {
		g, err := kind{}.New(guest.Spec{Name: "rt", Kind: KindName, RTPriority: prio}, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		reply, err := g.Exec(context.Background(), agent.Request{Argv: []string{"chrt", "-f", "50", "true"}, TimeoutMS: 10000})
		g.Stop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok := reply.Succeeded(); ok != (prio > 0) {
			t.Errorf("rt_priority %d: chrt -f 50 exited %d (%s); want success only with a priority", prio, reply.ExitCode, strings.TrimSpace(string(reply.Stderr)))
		}
	}
}
