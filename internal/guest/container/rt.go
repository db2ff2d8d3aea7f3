package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Real-time budgets under cgroup v1 group scheduling. A cgroup's
// real-time tasks may run rt_runtime_us of every rt_period_us, and a
// parent's budget bounds the sum of its children's, so the budget has to
// be handed down from the root through /vfleet and the run's cgroup.
const (
	rtPeriodUS = 1_000_000
	// containerRTRuntimeUS is one container's share: a timer-latency
	// thread waking every millisecond runs for a few microseconds each
	// time, well inside 10 ms a second, and 10 ms bounds what a runaway
	// real-time task can take from the host.
	containerRTRuntimeUS = 10_000
)

// parentRTRuntimeUS is what /vfleet and a run's cgroup below it ask of
// their parents: /vfleet half the kernel's default root budget (950 ms),
// each run half of that, so two runs with real-time containers can
// coexist and each holds 25 of them.
var parentRTRuntimeUS = []int64{500_000, 250_000}

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

// grantRTBudget creates the container's parent cgroups (under /vfleet) in
// the cpu hierarchy and gives each a real-time budget, so the runtime can
// give the container its own. The cgroups are the container's recorded
// cgroup path's parents, removed with it.
func grantRTBudget(cpuDir, cgroupsPath string) error {
	dir := cpuDir
	parts := strings.Split(strings.Trim(filepath.Dir(cgroupsPath), "/"), "/")
	for i, part := range parts {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("real-time budget: %w", err)
		}
		want := parentRTRuntimeUS[min(i, len(parentRTRuntimeUS)-1)]
		file := filepath.Join(dir, "cpu.rt_runtime_us")
		if current, err := readInt64(file); err == nil && current >= want {
			continue
		}
		if err := os.WriteFile(file, []byte(strconv.FormatInt(want, 10)), 0o644); err != nil {
			return fmt.Errorf("real-time budget: give %s %d µs/s: %w (the budget of its parent is taken: by other runs' "+
				"real-time containers, or by cgroups beside it; see their cpu.rt_runtime_us)", dir, want, err)
		}
	}
	return nil
}

func readInt64(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
