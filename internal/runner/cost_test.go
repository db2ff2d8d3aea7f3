package runner

import (
	"math"
	"testing"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

func TestCostSamples(t *testing.T) {
	h := stats.NewHistogram("us")
	for i := 0; i < 1000; i++ {
		h.Add(15)
	}
	parsed := []workload.Sample{
		{Metric: "net.throughput_bps", Unit: "bit/s", Value: 8e9, Better: workload.HigherIsBetter},
		{Metric: "net.rtt_us", Unit: "us", Value: 15, Better: workload.LowerIsBetter, Hist: h},
		{Metric: "net.rtt_p99_us", Unit: "us", Value: 20, Better: workload.LowerIsBetter},
	}
	// Two CPUs for 3 s (600 ticks), 150 of them busy: 0.5 cores, of
	// which the guest's processes ran 60 ticks in user mode and the kernel
	// 60 ticks.
	// The guest's own kernel saw it 0.75 busy.
	inGuest := 0.75
	got := costSamples(parsed, cpuUse{BusyTicks: 150, TotalTicks: 600, KernelTicks: 60, GuestUserTicks: 60, CPUs: 2, InGuest: &inGuest})
	want := map[string]float64{
		"net.host_busy_cores":         0.5,
		"net.cpu.guest_user_cores":    0.2,
		"net.cpu.kernel_cores":        0.2,
		"net.cpu.other_cores":         0.1,
		"net.cpu.in_guest_cores":      0.75,
		"net.throughput_bps_per_core": 16e9,
		// 0.2 kernel cores for 8 Gbit/s: 25 ms of kernel CPU per Gbit.
		"net.cpu.kernel_ms_per_gbit": 25,
		// 0.5 busy cores and 0.75 in the guest for 8 Gbit/s.
		"net.cpu.host_ms_per_gbit":     62.5,
		"net.cpu.in_guest_ms_per_gbit": 93.75,
		"net.cpu_us_per_transaction":   1.5e6 / 1000, // 1.5 s of CPU over 1000 round trips
		// 0.6 s of it the kernel's.
		"net.cpu.kernel_us_per_transaction": 0.6e6 / 1000,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d samples %+v, want %d", len(got), got, len(want))
	}
	for _, s := range got {
		if w, ok := want[s.Metric]; !ok || math.Abs(s.Value-w) > 1e-9*w {
			t.Errorf("%s = %v, want %v", s.Metric, s.Value, w)
		}
	}
	// Counted apart, the guest's and the kernel's ticks may exceed the busy
	// ones by a tick: nothing is left for the rest, and nothing is lost.
	over := map[string]float64{}
	for _, s := range costSamples(nil, cpuUse{BusyTicks: 100, TotalTicks: 200, KernelTicks: 20, GuestUserTicks: 81, CPUs: 2}) {
		over[s.Metric] = s.Value
	}
	if over["net.cpu.other_cores"] != 0 || over["net.cpu.guest_user_cores"] != 0.81 {
		t.Errorf("split of an overfull interval: %v", over)
	}
	if costSamples(parsed, cpuUse{}) != nil {
		t.Fatal("an empty interval produced costs")
	}
}
