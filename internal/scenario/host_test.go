package scenario

import (
	"reflect"
	"testing"
)

// The host a scenario is checked against is read from proc and sys
// roots.
func TestHostAt(t *testing.T) {
	got, err := HostAt("testdata/host/proc", "testdata/host/sys")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Host{CPUs: []int{0, 1, 2, 3, 6}, MemoryBytes: 8131204 << 10}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v; want %+v", got, want)
	}
	if _, err := HostAt(t.TempDir(), "testdata/host/sys"); err == nil {
		t.Error("a host without meminfo read")
	}
}
