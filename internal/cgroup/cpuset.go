package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CpusetV1Dir is the cgroup v1 cpuset hierarchy's mount point.
const CpusetV1Dir = "/sys/fs/cgroup/cpuset"

// cpusetParentsMu serialises the filling of cpuset parents within this
// process: guests of one run start at once and share their parents.
var cpusetParentsMu sync.Mutex

// FillCpusetParents makes the parents of a guest's cgroup path under
// cpusetDir (a v1 cpuset hierarchy: /vfleet, then the run's), gives each
// that has none its parent's CPUs and memory nodes, and has the kernel
// copy them into every cgroup made below (cgroup.clone_children). Some
// runtimes (runsc, LXC) fill only the cgroups they make themselves: below
// a parent another guest's start made a moment before and had not filled
// yet, theirs would stay empty, and the kernel refuses a process in an
// empty cpuset (EACCES, ENOSPC); runc fills every level itself. The
// guest's own cgroup is left to its runtime. The parents are those of the
// guest's recorded cgroup, removed with it. A host without a v1 cpuset
// hierarchy needs nothing.
func FillCpusetParents(cpusetDir, cgroupPath string) error {
	if _, err := os.Stat(filepath.Join(cpusetDir, "cpuset.cpus")); err != nil {
		return nil
	}
	cpusetParentsMu.Lock()
	defer cpusetParentsMu.Unlock()
	dir := cpusetDir
	for _, part := range strings.Split(strings.Trim(filepath.Dir(cgroupPath), "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cpuset of %s: %w", dir, err)
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			own, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				return fmt.Errorf("cpuset of %s: %w", dir, err)
			}
			if strings.TrimSpace(string(own)) != "" {
				continue
			}
			inherited, err := os.ReadFile(filepath.Join(parent, file))
			if err != nil {
				return fmt.Errorf("cpuset of %s: %w", dir, err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), inherited, 0o644); err != nil {
				return fmt.Errorf("cpuset of %s: give it %s: %w", dir, strings.TrimSpace(string(inherited)), err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.clone_children"), []byte("1"), 0o644); err != nil {
			return fmt.Errorf("cpuset of %s: %w", dir, err)
		}
	}
	return nil
}
