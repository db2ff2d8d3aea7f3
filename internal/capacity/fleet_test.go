package capacity

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
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

// TestHostLimitPassthroughDevices: on the passthrough path each VM takes
// a listed PCI device, so the search stops at the devices the fixed
// groups on that path leave, however much memory there is; no device left
// means not even one fits.
func TestHostLimitPassthroughDevices(t *testing.T) {
	host := scenario.Host{CPUs: []int{0, 1}, MemoryBytes: 64 << 30}
	pt := string(netpath.Passthrough)
	scaled := scenario.GuestGroup{Name: "vfio", Network: pt, Spec: guest.Spec{MemoryBytes: 512 << 20}}
	fixed := scenario.GuestGroup{Name: "fixed", Count: 1, Network: pt}
	other := scenario.GuestGroup{Name: "bridged", Count: 2, Network: string(netpath.Bridge)}
	for _, tc := range []struct {
		name    string
		devices int
		limit   int
	}{
		{"three devices, one fixed VM", 3, 2},
		{"one device, the fixed VM's", 1, 0},
	} {
		spec := &scenario.Spec{Guests: []scenario.GuestGroup{fixed, other, scaled},
			Network: &scenario.Network{Passthrough: []string{"0000:03:10.0", "0000:03:10.2", "0000:03:10.4"}[:tc.devices]}}
		limit, reason := HostLimit(spec, scaled, host)
		if limit != tc.limit || !strings.HasPrefix(reason, "devices: ") || !strings.Contains(reason, "network.passthrough") {
			t.Errorf("%s: %d %q, want %d for the devices", tc.name, limit, reason, tc.limit)
		}
	}
}
