package hostinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Cgroup modes as CgroupMode reports them.
const (
	CgroupV1     = "v1"
	CgroupV2     = "v2"
	CgroupHybrid = "hybrid"
)

// CgroupMode tells how cgroups are mounted under sysRoot/fs/cgroup: "v2"
// (the unified hierarchy alone), "hybrid" (v1 controllers plus a unified
// hierarchy at unified/), or "v1".
//
// The filesystem type decides on a live system. A fixture tree has no
// cgroup filesystem, so a cgroup.controllers file — which only the v2
// hierarchy has — is accepted as the same signal.
func CgroupMode(sysRoot string) (string, error) {
	root := filepath.Join(sysRoot, "fs", "cgroup")
	st, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("cgroup mode: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("cgroup mode: %s is not a directory", root)
	}
	v2, err := isUnified(root)
	if err != nil {
		return "", err
	}
	if v2 {
		return CgroupV2, nil
	}
	unified := filepath.Join(root, "unified")
	if _, err := os.Stat(unified); err == nil {
		if v2, err = isUnified(unified); err != nil {
			return "", err
		}
		if v2 {
			return CgroupHybrid, nil
		}
	}
	return CgroupV1, nil
}

// isUnified reports whether dir is the root of a cgroup v2 hierarchy.
func isUnified(dir string) (bool, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return false, fmt.Errorf("cgroup mode: statfs %s: %w", dir, err)
	}
	if sfs.Type == unix.CGROUP2_SUPER_MAGIC {
		return true, nil
	}
	_, err := os.Stat(filepath.Join(dir, "cgroup.controllers"))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("cgroup mode: %w", err)
	}
}
