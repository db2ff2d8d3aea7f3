package cgroup

import (
	"reflect"
	"testing"
)

func TestMountsAndHolders(t *testing.T) {
	got, err := Mounts("testdata/proc")
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
