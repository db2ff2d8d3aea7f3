package cgroup_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/testutil"
)

// dirsOf lists where the cgroup at cgroupPath is, in a v2 host's one
// hierarchy or below any of a v1 host's.
func dirsOf(cgroupPath string) []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup" + cgroupPath, "/sys/fs/cgroup/*" + cgroupPath} {
		m, _ := filepath.Glob(pattern)
		out = append(out, m...)
	}
	return out
}

// Removing a run's last cgroup removes the run's directory and keeps
// Parent, where other runs make theirs at the same time.
func TestRemoveKeepsTheSharedParent(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	run := testutil.RunID(t)
	g, err := cgroup.Create(cgroup.PathOf(run, "g"))
	if err != nil {
		t.Fatal(err)
	}
	made := dirsOf(cgroup.PathOf(run, ""))
	if len(made) == 0 {
		t.Fatalf("the run's cgroup %s is nowhere", cgroup.PathOf(run, ""))
	}
	if err := cgroup.Remove(g.Path); err != nil {
		t.Fatal(err)
	}
	if left := dirsOf(cgroup.PathOf(run, "")); len(left) > 0 {
		t.Errorf("the run's cgroup is still in %v", left)
	}
	for _, d := range made {
		parent := filepath.Dir(d)
		if kept := dirsOf(cgroup.Parent); !slices.Contains(kept, parent) {
			t.Errorf("%s went with the run's last cgroup", parent)
		}
	}
}
