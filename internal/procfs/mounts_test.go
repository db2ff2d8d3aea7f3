package procfs

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

// The mount table is read from a proc root, its mount points unescaped
// and the superblock's options kept (a v1 cgroup's controllers).
func TestMounts(t *testing.T) {
	got, err := Mounts("testdata/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, m := range got {
		points = append(points, m.Point)
	}
	want := []string{"/proc", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/freezer", "/var/lib/with space\ttab\\back"}
	if !reflect.DeepEqual(points, want) {
		t.Errorf("points %q; want %q", points, want)
	}
	if got[1].FSType != "cgroup2" || got[2].FSType != "cgroup" {
		t.Errorf("types %q, %q; want cgroup2, cgroup", got[1].FSType, got[2].FSType)
	}
	if _, ok := got[2].Super["freezer"]; !ok {
		t.Errorf("freezer's superblock options %v; want freezer among them", got[2].Super)
	}
}

func TestMountsWithoutTable(t *testing.T) {
	if _, err := Mounts(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v; want a missing file", err)
	}
}
