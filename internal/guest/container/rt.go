package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Real-time budgets under cgroup v1 group scheduling. A cgroup's
// real-time tasks may run rt_runtime_us of every rt_period_us, and a
// parent's budget bounds the sum of its children's, so the budget has to
// be handed down from the root through /vfleet and the run's cgroup.
const (
	rtPeriodUS = 1_000_000
	// containerRTRuntimeUS is one container's share, a tenth of a CPU: a
	// timer-latency thread waking every millisecond runs for a few
	// microseconds each time on bare metal, but for 10 to 20 on a nested
	// VM, and a budget it exhausts would throttle it for the rest of the
	// second: what cyclictest would then measure is the budget, not the
	// isolation.
	containerRTRuntimeUS = 100_000
)

// cpuV1Dir is the cgroup v1 cpu hierarchy's mount point.
const cpuV1Dir = "/sys/fs/cgroup/cpu"

// rtGroupScheduling reports whether cgroups under cpuDir carry a real-time
// budget: cgroup v1 with CONFIG_RT_GROUP_SCHED. Under cgroup v2 the
// kernel keeps real-time tasks out of the cpu controller's accounting, and
// a container needs only the capability and the rlimit.
func rtGroupScheduling(cpuDir string) bool {
	_, err := os.Stat(filepath.Join(cpuDir, "cpu.rt_runtime_us"))
	return err == nil
}

// rtBudgetMu serialises a real-time container's budget with its start:
// the parents are sized for the containers that exist plus the one
// starting, and the runtime takes that room when it creates the cgroup.
var rtBudgetMu sync.Mutex

// runWithBudget runs start (the runtime creating the container) with a
// real-time budget made for it in the parent cgroups, when it needs one.
func (g *Guest) runWithBudget(ctx context.Context, cgroupsPath string, start func() error) error {
	if g.rtRuntime() == 0 {
		return start()
	}
	rtBudgetMu.Lock()
	defer rtBudgetMu.Unlock()
	if err := grantRTBudget(cpuV1Dir, cgroupsPath, containerRTRuntimeUS); err != nil {
		return err
	}
	return start()
}

// grantRTBudget makes room for a container's real-time budget in each of
// its parent cgroups under cpuDir (/vfleet, then the run's), creating
// them: a parent's budget must cover the sum of its children's, so each is
// raised to what its children hold plus the new container's. The cgroups
// are the container's recorded cgroup path's parents, removed with it.
func grantRTBudget(cpuDir, cgroupsPath string, need int64) error {
	dir := cpuDir
	for _, part := range strings.Split(strings.Trim(filepath.Dir(cgroupsPath), "/"), "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("real-time budget: %w", err)
		}
	}
	// Top down: a parent must have grown before its child may.
	dir = cpuDir
	for _, part := range strings.Split(strings.Trim(filepath.Dir(cgroupsPath), "/"), "/") {
		dir = filepath.Join(dir, part)
		held, err := childrenRTRuntime(dir)
		if err != nil {
			return fmt.Errorf("real-time budget: %w", err)
		}
		want := held + need
		file := filepath.Join(dir, "cpu.rt_runtime_us")
		if current, err := readInt64(file); err == nil && current >= want {
			continue
		}
		if err := os.WriteFile(file, []byte(strconv.FormatInt(want, 10)), 0o644); err != nil {
			return fmt.Errorf("real-time budget: give %s %d µs/s: %w (the real-time budget of the host, 950 ms/s by default, "+
				"is taken: %d µs/s per real-time container; see the cpu.rt_runtime_us of the cgroups beside it)", dir, want, err, need)
		}
	}
	return nil
}

// childrenRTRuntime sums the real-time budgets of dir's child cgroups.
func childrenRTRuntime(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if v, err := readInt64(filepath.Join(dir, e.Name(), "cpu.rt_runtime_us")); err == nil {
			sum += v
		}
	}
	return sum, nil
}

func readInt64(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
