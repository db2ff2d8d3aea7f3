package capacity

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// TestGroupSamples: at one guest, the guest is named as its group, as the
// group's sums are; only the guest's own samples of the scenario's
// workloads decide a size.
func TestGroupSamples(t *testing.T) {
	stored := []store.Sample{
		{Guest: "c", Group: "c", WorkloadID: "cpu", Metric: "events_per_sec", Unit: "events/s", Value: 1000},
		{Guest: "c", Group: "c", WorkloadID: "cpu", Metric: "total.events_per_sec", Unit: "events/s", Value: 1000},
		{Guest: "c", Group: "c", WorkloadID: "cpu", Metric: "fleet.overlap_pct", Unit: "%", Value: 100},
		{Guest: "c", Group: "c", WorkloadID: "launch", Metric: "launch.ready_s", Unit: "s", Value: 0.1},
		{Guest: "host", Group: "host", WorkloadID: "cpu", Metric: "events_per_sec", Unit: "events/s", Value: 1100},
	}
	got := groupSamples(stored, "c", Catalog{"cpu": nil})
	want := []Sample{{Metric: "cpu.events_per_sec", Unit: "events/s", Guest: "c", Value: 1000}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestHostLimit(t *testing.T) {
	host := scenario.Host{CPUs: []int{0, 1}, MemoryBytes: 4 << 30}
	group := func(mem int64, cpu float64) scenario.GuestGroup {
		return scenario.GuestGroup{Name: "c", Spec: guest.Spec{MemoryBytes: mem, CPULimit: cpu}}
	}
	fixed := scenario.GuestGroup{Name: "host", Count: 1, Spec: guest.Spec{MemoryBytes: 1 << 30}}
	for _, tc := range []struct {
		name   string
		group  scenario.GuestGroup
		limit  int
		reason string
	}{
		{"unbounded", group(0, 0), 0, ""},
		{"memory, beside the fixed groups", group(512<<20, 0), 6, "memory: 6 guests of 512 MiB"},
		{"CPU", group(0, 0.5), 4, "CPU: 4 guests limited to 0.5 CPUs"},
		{"the smaller of both", group(256<<20, 0.25), 8, "CPU: 8 guests"},
		{"none fits", group(8<<30, 0), 0, "memory: 0 guests"},
	} {
		spec := &scenario.Spec{Guests: []scenario.GuestGroup{fixed, tc.group}}
		limit, reason := HostLimit(spec, tc.group, host)
		if limit != tc.limit || !strings.HasPrefix(reason, tc.reason) || (tc.reason == "") != (reason == "") {
			t.Errorf("%s: %d %q, want %d %q", tc.name, limit, reason, tc.limit, tc.reason)
		}
	}
}
