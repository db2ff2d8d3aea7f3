package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A parent cgroup made but not filled yet (by another guest's start)
// gets its parent's CPUs and memory nodes, one filled already keeps its
// own, both pass theirs on to the cgroups a runtime makes below them, and
// the guest's own cgroup is left to its runtime.
func TestFillCpusetParents(t *testing.T) {
	root := t.TempDir()
	write := func(dir, cpus, mems string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, v := range map[string]string{"cpuset.cpus": cpus, "cpuset.mems": mems} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(root, "0-3\n", "0\n")
	write(filepath.Join(root, "vfleet"), "\n", "\n")   // made by another start, not filled yet
	write(filepath.Join(root, "vfleet", "r1"), "", "") // likewise
	// A real cpuset directory has its files from the moment it is made;
	// a plain one gets them when Mkdir finds it existing.
	if err := FillCpusetParents(root, "/vfleet/r1/g"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"vfleet", "vfleet/r1"} {
		for file, want := range map[string]string{"cpuset.cpus": "0-3", "cpuset.mems": "0", "cgroup.clone_children": "1"} {
			b, _ := os.ReadFile(filepath.Join(root, dir, file))
			if strings.TrimSpace(string(b)) != want {
				t.Errorf("%s/%s = %q, want %s", dir, file, b, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "vfleet", "r1", "g")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the guest's own cgroup is its runtime's to make: %v", err)
	}
	write(filepath.Join(root, "vfleet", "r1"), "1\n", "0\n")
	if err := FillCpusetParents(root, "/vfleet/r1/g"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "vfleet", "r1", "cpuset.cpus")); string(b) != "1\n" {
		t.Errorf("a parent's own CPUs were replaced: %q", b)
	}
	if err := FillCpusetParents(filepath.Join(root, "none"), "/vfleet/r1/g"); err != nil {
		t.Errorf("no cpuset hierarchy: %v", err)
	}
}
