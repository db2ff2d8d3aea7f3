package report

import (
	"reflect"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

func envRow(h hostinfo.Fingerprint, label string) (string, bool) {
	for _, r := range environment(h) {
		if r[0] == label {
			return r[1], true
		}
	}
	return "", false
}

func TestEnvironmentRealTimeRow(t *testing.T) {
	absent := hostinfo.TracerAbsent
	for _, tc := range []struct {
		name string
		rt   hostinfo.RealTime
		want string
	}{
		{"this host", hostinfo.RealTime{Preemption: "dynamic", RTRuntimeUS: 950000, RTPeriodUS: 1000000,
			IRQsPerCPU: map[int]int{0: 9, 1: 10},
			Tracers:    map[string]string{"timerlat": absent, "osnoise": absent, "hwlat": absent}},
			"preemption dynamic · RT throttling 950000/1000000 us · timerlat, osnoise, hwlat not in this kernel"},
		{"tuned RT host", hostinfo.RealTime{Preemption: "rt", RTRuntimeUS: -1, RTPeriodUS: 1000000, IsolatedCPUs: "2-3", NohzFull: "2-3",
			Tracers: map[string]string{"timerlat": hostinfo.TracerAvailable, "osnoise": hostinfo.TracerAvailable, "hwlat": absent}},
			"preemption rt · RT throttling off · isolated 2-3 · nohz_full 2-3 · timerlat, osnoise available; hwlat not in this kernel"},
		// RT tasks get no time at all: worth showing, not mistaking for absent.
		{"runtime 0", hostinfo.RealTime{RTRuntimeUS: 0, RTPeriodUS: 1000000}, "RT throttling 0/1000000 us"},
	} {
		got, ok := envRow(hostinfo.Fingerprint{RealTime: tc.rt}, "real-time")
		if !ok || got != tc.want {
			t.Errorf("%s: row %q (present %v), want %q", tc.name, got, ok, tc.want)
		}
	}
	// A run recorded before the fingerprint had it shows no row at all.
	if got, ok := envRow(hostinfo.Fingerprint{Hostname: "lab1"}, "real-time"); ok {
		t.Errorf("empty RealTime shown as %q", got)
	}
}

func TestHostDifferencesRealTime(t *testing.T) {
	a := hostinfo.Fingerprint{RealTime: hostinfo.RealTime{Preemption: "dynamic", RTRuntimeUS: 950000, RTPeriodUS: 1000000,
		IRQsPerCPU: map[int]int{0: 9}, Tracers: map[string]string{"timerlat": hostinfo.TracerAbsent}}}
	b := hostinfo.Fingerprint{RealTime: hostinfo.RealTime{Preemption: "rt", RTRuntimeUS: -1, RTPeriodUS: 1000000, IsolatedCPUs: "1",
		IRQsPerCPU: map[int]int{0: 10}, Tracers: map[string]string{"timerlat": hostinfo.TracerAvailable}}}
	want := []string{"preemption: dynamic → rt", "RT throttling: 950000/1000000 us → off", "isolated CPUs: none → 1"}
	if got := hostDifferences(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := hostDifferences(a, a); got != nil {
		t.Errorf("same host: %q", got)
	}
	// Against a run recorded before RealTime existed, nothing is known to
	// have been isolated.
	want = []string{"preemption: unknown → rt", "RT throttling: unknown → off", "isolated CPUs: unknown → 1", "nohz_full: unknown → none"}
	if got := hostDifferences(hostinfo.Fingerprint{}, b); !reflect.DeepEqual(got, want) {
		t.Errorf("older run: got %q, want %q", got, want)
	}
}
