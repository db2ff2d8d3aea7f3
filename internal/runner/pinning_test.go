package runner

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	// The kinds whose traits and fields placement follows: plans are only
	// placed here, no guest of them starts.
	_ "github.com/vfleet/vfleet/internal/guest/all"
	"github.com/vfleet/vfleet/internal/scenario"
)

// fakeTopology writes a sysfs cpu directory: packages × cores × threads,
// numbered the way Linux numbers a two-socket SMT host (all first threads,
// then all second threads).
func fakeTopology(t *testing.T, pkgs, cores, threads int) string {
	t.Helper()
	dir := t.TempDir()
	n := pkgs * cores * threads
	id := 0
	for th := 0; th < threads; th++ {
		for p := 0; p < pkgs; p++ {
			for c := 0; c < cores; c++ {
				topo := filepath.Join(dir, "cpu"+strconv.Itoa(id), "topology")
				if err := os.MkdirAll(topo, 0o755); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(topo, "core_id"), []byte(strconv.Itoa(c)+"\n"), 0o644)
				os.WriteFile(filepath.Join(topo, "physical_package_id"), []byte(strconv.Itoa(p)+"\n"), 0o644)
				id++
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "online"), []byte("0-"+strconv.Itoa(n-1)+"\n"), 0o644)
	return dir
}

func TestSpreadAlternatesPackagesThenCoresThenThreads(t *testing.T) {
	cpus, err := readTopology(fakeTopology(t, 2, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	// Linux numbering: 0,1 = pkg0 cores 0,1; 2,3 = pkg1 cores 0,1; 4-7 their siblings.
	want := []int{0, 2, 1, 3, 4, 6, 5, 7}
	if got := spreadOrder(cpus); !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func plan(t *testing.T, src string) *scenario.Plan {
	t.Helper()
	// Placement is checked against the fake topologies of these tests, so
	// the scenario is loaded for a host with every CPU they name.
	big := &scenario.Host{CPUs: make([]int, 64), MemoryBytes: 1 << 40}
	for i := range big.CPUs {
		big.CPUs[i] = i
	}
	spec, err := scenario.Parse("t.yaml", []byte(src), scenario.Options{KnownKinds: []string{"host", "container", "vm"}, Host: big})
	if err != nil {
		t.Fatal(err)
	}
	return spec.Expand()
}

func TestPlaceSpreadReservesAndLabelsOversubscription(t *testing.T) {
	cpus, err := readTopology(fakeTopology(t, 1, 4, 1))
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, `name: t
fleet: {pinning: {strategy: spread, reserve: 1}}
guests:
  - kind: host
  - {name: c, kind: container, count: 4}
  - {name: v, kind: vm, vcpus: 2}
workloads: [{workload: cpu}]
`)
	pl, err := place(p, cpus)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range p.Guests {
		s := pl.on(g.Spec)
		got[s.Name] = s.CPUs + "|" + s.PinVCPUs
	}
	want := map[string]string{"host": "|", "c-0": "1|", "c-1": "2|", "c-2": "3|", "c-3": "1|", "v": "|2-3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("placement = %v\nwant %v", got, want)
	}
	if pl.details["c-3"]["oversubscription"] != "2.00" || !strings.Contains(pl.summary, "oversubscribed 2.00×") {
		t.Errorf("6 CPUs wanted of 3: details %v, summary %q", pl.details["c-3"], pl.summary)
	}
	// Tools in 6 busy vCPUs on 3 CPUs take twice as long; in 2, no longer.
	if s := pl.stretch(6); s != 2 {
		t.Errorf("stretch of 6 vCPUs on 3 CPUs = %v, want 2", s)
	}
	if s := pl.stretch(2); s != 1 {
		t.Errorf("stretch of 2 vCPUs on 3 CPUs = %v, want 1", s)
	}
}

func TestPlaceKeepsMeasuredGuestsOffTheNoiseCPUs(t *testing.T) {
	cpus, err := readTopology(fakeTopology(t, 1, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, `name: t
noise: {profiles: [none, cpu], on: n}
guests:
  - kind: host
  - {name: c, kind: container}
  - {name: n, kind: container}
workloads: [{workload: cpu}]
`)
	pl, err := place(p, cpus)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, g := range p.Guests {
		byName[g.Spec.Name] = pl.on(g.Spec).CPUs
	}
	if pl.noiseCPUs != "0" || byName["n"] != "0" || byName["c"] != "1" || byName["host"] != "" || pl.hostCPUs != "1" {
		t.Errorf("noise %q, cpusets %v, host %q: want aggressors on 0, the container on 1, the host's tools under taskset on 1",
			pl.noiseCPUs, byName, pl.hostCPUs)
	}
}

func TestPlaceRefusesWhatTheHostCannotHold(t *testing.T) {
	one, err := readTopology(fakeTopology(t, 1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	two, err := readTopology(fakeTopology(t, 1, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		cpus []hostCPU
		want string
	}{
		{"name: t\nfleet: {pinning: {reserve: 2}}\nguests: [{kind: host}]\nworkloads: [{workload: cpu}]\n", two, "leaves no CPU for guests on this 2-CPU host"},
		{"name: t\nnoise: {profiles: [cpu]}\nguests: [{kind: host}]\nworkloads: [{workload: cpu}]\n", one, "noise needs a CPU of its own"},
		{"name: t\nnoise: {profiles: [cpu], cpus: \"0-1\"}\nguests: [{kind: host}]\nworkloads: [{workload: cpu}]\n", two, "no CPU is left for the measured guests"},
		{"name: t\nnoise: {profiles: [cpu], cpus: \"7\"}\nguests: [{kind: host}]\nworkloads: [{workload: cpu}]\n", two, "CPU 7 is not online"},
	} {
		if _, err := place(plan(t, tc.src), tc.cpus); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}
