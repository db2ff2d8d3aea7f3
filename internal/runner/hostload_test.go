package runner

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/scenario"
)

// v2 is a cgroup v2 hierarchy at dir.
func v2(dir string) []cgroup.Mount { return []cgroup.Mount{{Dir: dir, V2: true}} }

// Two reads around a step, from fixture trees (testdata/load-a, load-b:
// two CPUs, 2 s of ticks between them; the run's cgroup used 1.2 s, and
// the cgroup of its A/B partner, made meanwhile, 0.3 s): the step's load
// is the difference, the runs' own time being their cgroups' and this
// process's.
func TestStepLoadFromTwoReads(t *testing.T) {
	a, err := readLoadMark("testdata/load-a/proc", v2("testdata/load-a/cgroup"), []string{"rk", "rk2"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := readLoadMark("testdata/load-b/proc", v2("testdata/load-b/cgroup"), []string{"rk", "rk2"})
	if err != nil {
		t.Fatal(err)
	}
	st := scenario.Step{WorkloadID: "cpu", Repetition: 3}
	l := stepLoad(st, "c-1", a, b)
	if l.Guest != "c-1" || l.WorkloadID != "cpu" || l.Repetition != 3 || l.CPUs != 2 ||
		l.TotalTicks != 400 || l.TaskTicks != 200 || l.StealTicks != 15 {
		t.Fatalf("load %+v; want 2 CPUs, 400 ticks, 200 of tasks, 15 stolen", l)
	}
	// This process's own time between the reads comes on top of the
	// cgroups' 1.5 s.
	if l.OwnNS < 1.5e9 || l.WallNS < 0 {
		t.Errorf("own %d ns, wall %d ns; want at least the cgroups' 1.5 s", l.OwnNS, l.WallNS)
	}
	// Counters that went back (a CPU taken offline) are nothing, not a
	// wrapped number.
	if back := stepLoad(st, "", b, a); back.TotalTicks != 0 || back.TaskTicks != 0 || back.StealTicks != 0 || back.OwnNS != 0 {
		t.Errorf("counters going back: %+v; want zeros", back)
	}
}

// A run whose cgroup is not there yet has used nothing in it; a host
// whose /proc/stat cannot be read gives no load at all.
func TestLoadMarkReads(t *testing.T) {
	if _, err := readLoadMark("testdata/load-a/proc", v2("testdata/load-a/cgroup"), []string{"other"}); err != nil {
		t.Errorf("no cgroup of the run: %v; want a mark", err)
	}
	if _, err := readLoadMark("testdata/none", v2("testdata/load-a/cgroup"), []string{"rk"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no /proc/stat: %v; want not exist", err)
	}
}
