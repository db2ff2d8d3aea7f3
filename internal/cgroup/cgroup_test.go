package cgroup

import (
	"reflect"
	"strings"
	"testing"
)

func TestMountsAndHolders(t *testing.T) {
	info := "35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:12 - cgroup cgroup rw,cpu\n" +
		"36 25 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n" +
		"37 25 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n" +
		"38 25 0:35 / /sys/fs/cgroup/my\\040tree rw - cgroup cgroup rw,name=mine\n" +
		"39 25 0:32 / /proc rw - proc proc rw\n"
	got, err := Mounts(strings.NewReader(info))
	want := []Mount{{Dir: "/sys/fs/cgroup/cpu"}, {Dir: "/sys/fs/cgroup/unified", V2: true},
		{Dir: "/sys/fs/cgroup/freezer", Freezer: true}, {Dir: "/sys/fs/cgroup/my tree"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("mounts = %+v, %v; want %+v", got, err, want)
	}
	// Only hierarchies that limit nothing hold a guest's processes.
	if h := holders(got); !reflect.DeepEqual(h, []Mount{want[1], want[2]}) {
		t.Fatalf("holders = %+v", h)
	}
	if h := holders(got[:1]); len(h) != 0 {
		t.Fatalf("a cpu hierarchy alone holds: %+v", h)
	}
}

func TestPathOf(t *testing.T) {
	if got := PathOf("r1-abc", "peer"); got != "/vfleet/r1-abc/peer" {
		t.Fatalf("PathOf = %q", got)
	}
}
