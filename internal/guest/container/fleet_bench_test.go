package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/density"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

// idleWindow is how long the started fleet is left alone while its CPU use
// is measured.
const idleWindow = 10 * time.Second

// TestMeasureFleet starts a fleet of runc containers, at most K at a time,
// leaves it idle, and prints what it cost the host, for
// docs/fleet-performance.md: launch times, CPU while idle, memory and disk
// per guest. It asserts nothing about the figures, only that every
// container started and that nothing is left once they are stopped. It runs
// only when VFLEET_MEASURE_FLEET is set to the number of containers;
// VFLEET_MEASURE_CONCURRENCY sets K (default 4, the runner's default).
func TestMeasureFleet(t *testing.T) {
	n := envInt("VFLEET_MEASURE_FLEET", 0)
	if n <= 0 {
		t.Skip("measurement: set VFLEET_MEASURE_FLEET=N to run")
	}
	concurrency := envInt("VFLEET_MEASURE_CONCURRENCY", 4)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "runc", "runc")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)

	root := t.TempDir()
	led, err := ledger.Create(root, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := led.Pending(); len(p) > 0 {
			t.Errorf("ledger still holds %d entries: %v", len(p), p)
		}
		led.Close()
	}()
	env := guest.Env{RunID: "m", RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: filepath.Join(root, "s"), Ledger: led}
	k, _ := guest.Lookup(KindName)
	guests := make([]guest.Guest, n)
	for i := range guests {
		spec := guest.Spec{Name: fmt.Sprintf("g%d", i), Kind: KindName, Runtime: "runc", MemoryBytes: 256 << 20}
		if guests[i], err = k.New(spec, env); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	self := []int{os.Getpid()}
	selfBefore := cpuTime(t, self)
	began := time.Now()
	startErr := eachBounded(guests, concurrency, func(g guest.Guest) error { return g.Start(ctx) })
	allReady := time.Since(began)
	var agents []int
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		began := time.Now()
		if err := eachBounded(guests, concurrency, func(g guest.Guest) error { return g.Stop(context.Background()) }); err != nil {
			t.Error(err)
		}
		t.Logf("stop: %d containers in %v", n, time.Since(began).Round(time.Millisecond))
		// A killed agent is reaped by the host's init, a moment later.
		left := density.ProcessTree(agents)
		for deadline := time.Now().Add(3 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = density.ProcessTree(agents) {
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("processes left after stop: %v", left)
		}
	}
	defer stop()
	if startErr != nil {
		t.Fatal(startErr)
	}

	var starts []time.Duration
	for _, g := range guests {
		info := g.Info()
		starts = append(starts, info.BootTime)
		agents = append(agents, info.PIDs[0])
	}
	cores := runtime.NumCPU()
	t.Logf("start: %d containers, %d at a time, on %d cores: all ready in %v; per container p50 %v p99 %v max %v; %.1f containers/s/core",
		n, concurrency, cores, allReady.Round(time.Millisecond), percentile(starts, 50), percentile(starts, 99), percentile(starts, 100),
		float64(n)/allReady.Seconds()/float64(cores))

	// The runtime's processes are this process's children, reaped by now:
	// their time is in its cutime and cstime. Each container's init was
	// the runtime's until it became the agent: its time up to now is the
	// container's side of the launch.
	launchSelf, launchAgents := cpuTime(t, self)-selfBefore, cpuTime(t, agents)
	t.Logf("cpu per launch: vfleet and runtime processes %v, container init until ready %v",
		launchSelf/time.Duration(n), launchAgents/time.Duration(n))

	agentCPU0, selfCPU0 := cpuTime(t, agents), cpuTime(t, self)
	window := time.Now()
	time.Sleep(idleWindow)
	agentCPU, selfCPU := cpuTime(t, agents)-agentCPU0, cpuTime(t, self)-selfCPU0
	elapsed := time.Since(window)
	t.Logf("idle %v: all %d agents %.2f%% of a core (%v), test process %.2f%% (%v)", elapsed.Round(time.Millisecond), n,
		percentOf(agentCPU, elapsed), agentCPU, percentOf(selfCPU, elapsed), selfCPU)

	var agentMem, restMem density.Usage
	for _, pid := range agents {
		whole, err := density.Memory([]int{pid})
		if err != nil {
			t.Fatal(err)
		}
		var rest density.Usage
		if tree := density.ProcessTree([]int{pid}); len(tree) > 1 {
			if rest, err = density.Memory(tree[1:]); err != nil {
				t.Fatal(err)
			}
		}
		agentMem.RSS += whole.RSS - rest.RSS
		agentMem.PSS += whole.PSS - rest.PSS
		restMem.RSS += rest.RSS
		restMem.PSS += rest.PSS
		restMem.Processes += rest.Processes
	}
	t.Logf("memory per guest: agent (vfleet's share) PSS %s RSS %s; rest of the container PSS %s RSS %s (%d processes in all %d)",
		mib(agentMem.PSS/int64(n)), mib(agentMem.RSS/int64(n)), mib(restMem.PSS/int64(n)), mib(restMem.RSS/int64(n)), restMem.Processes, n)

	var state, upper []int64
	for _, g := range guests {
		dir := filepath.Join(env.StateDir, g.Spec().Name)
		state = append(state, diskUsage(t, dir))
		upper = append(upper, diskUsage(t, filepath.Join(dir, "upper")))
	}
	t.Logf("disk per guest: state directory p50 %s max %s, overlay upper dir p50 %s max %s; image rootfs %s",
		kib(median(state)), kib(slices.Max(state)), kib(median(upper)), kib(slices.Max(upper)), mib(diskUsage(t, img.RootFS)))

	stop()
	for _, g := range guests {
		if _, err := os.Stat(filepath.Join(env.StateDir, g.Spec().Name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state directory of %s left after stop: %v", g.Spec().Name, err)
		}
	}
}

// eachBounded runs f on every guest, at most k at a time, the way the
// runner starts a plan's guests.
func eachBounded(gs []guest.Guest, k int, f func(guest.Guest) error) error {
	sem := make(chan struct{}, k)
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(g)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func envInt(name string, def int) int {
	n := def
	if v := os.Getenv(name); v != "" {
		fmt.Sscan(v, &n)
	}
	return n
}

func cpuTime(t *testing.T, pids []int) time.Duration {
	t.Helper()
	d, err := density.CPUTime(pids)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := density.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Millisecond)
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func percentOf(d, of time.Duration) float64 { return 100 * d.Seconds() / of.Seconds() }

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

func kib(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }
