package lxc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cpusetV1Dir is the cgroup v1 cpuset hierarchy's mount point.
const cpusetV1Dir = "/sys/fs/cgroup/cpuset"

// fillCpusetParents gives the parents of a guest's cgroups in the v1
// cpuset hierarchy (/vfleet, then the run's) their parent's CPUs and
// memory nodes where they have none yet, and has the kernel copy them
// into every cgroup made below (cgroup.clone_children). LXC fills only
// the cgroups it makes along the path: below a parent that exists already
// (another guest's runtime made the run's), the monitor's and the
// container's cgroups would stay empty, which the kernel refuses to put
// a process in (ENOSPC). The directories are the guest's recorded
// cgroups' parents, removed with them.
func fillCpusetParents(root, cgroupPath string) error {
	dir := root
	for _, part := range strings.Split(strings.Trim(filepath.Dir(cgroupPath), "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cpuset of %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return fmt.Errorf("cpuset of %s: %w", dir, err)
			}
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			want, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("cpuset of %s: %w", dir, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), want, 0o644); err != nil {
				return fmt.Errorf("cpuset of %s: %w", dir, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.clone_children"), []byte("1"), 0o644); err != nil {
			return fmt.Errorf("cpuset of %s: %w", dir, err)
		}
	}
	return nil
}
