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
	"github.com/vfleet/vfleet/internal/testutil"
)

func TestBundleGrantsRealTimeOnlyWhenAsked(t *testing.T) {
	plain := mustBundle(t, BundleOptions{})
	if slices.Contains(plain.Process.Capabilities.Effective, "CAP_SYS_NICE") {
		t.Errorf("a plain container must not get real-time rights: %+v", plain.Process)
	}
	rt := mustBundle(t, BundleOptions{RTPriority: 95, RTRuntimeUS: containerRTRuntimeUS})
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
	if v2 := mustBundle(t, BundleOptions{RTPriority: 95}); v2.Linux.Resources.CPU != nil {
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
	env := runEnv(t, "rt-test", img)
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

// Each parent is raised to what its children hold plus the new
// container's budget, top down.
func TestGrantRTBudgetMakesRoomInEveryParent(t *testing.T) {
	cpu := t.TempDir()
	write := func(rel string, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(cpu, rel), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cpu, rel, "cpu.rt_runtime_us"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("vfleet", "100000")
	write("vfleet/r1", "100000")
	write("vfleet/r1/c", "100000")
	if err := grantRTBudget(cpu, "/vfleet/r2/c", 100000); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]int64{"vfleet": 200000, "vfleet/r2": 100000, "vfleet/r1": 100000} {
		if got, err := readInt64(filepath.Join(cpu, rel, "cpu.rt_runtime_us")); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", rel, got, err, want)
		}
	}
	// A second container in r1 makes r1 hold two budgets.
	if err := grantRTBudget(cpu, "/vfleet/r1/d", 100000); err != nil {
		t.Fatal(err)
	}
	if got, _ := readInt64(filepath.Join(cpu, "vfleet", "r1", "cpu.rt_runtime_us")); got != 200000 {
		t.Errorf("r1 = %d, want room for its existing container and the new one", got)
	}
}
