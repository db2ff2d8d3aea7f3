package runner

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// loadMark is the host's CPU accounting at one moment of a run: its CPUs'
// counters, and the CPU time the run's own processes had used by then.
type loadMark struct {
	at    time.Time
	cpu   procfs.CPUStat
	ownNS int64
}

// loadProcRoot is where a step's host load is read on this host.
const loadProcRoot = "/proc"

// readLoadMark reads the host's counters under procRoot and the CPU time
// of the runs' cgroups (every guest's, the peer's, the noise guests') in
// the hierarchies of mounts, plus this process's own and its reaped
// children's: all of it is the runs' work, the rest of the tasks' time is
// not.
func readLoadMark(procRoot string, mounts []cgroup.Mount, runKeys []string) (loadMark, error) {
	cpu, err := procfs.ReadCPUStat(procRoot)
	if err != nil {
		return loadMark{}, err
	}
	var own int64
	for _, key := range runKeys {
		run, err := cgroup.CPUUsage(mounts, cgroup.PathOf(key, ""))
		if err != nil {
			return loadMark{}, err
		}
		own += int64(run * 1e9)
	}
	for _, who := range []int{unix.RUSAGE_SELF, unix.RUSAGE_CHILDREN} {
		var ru unix.Rusage
		if err := unix.Getrusage(who, &ru); err != nil {
			return loadMark{}, err
		}
		own += ru.Utime.Nano() + ru.Stime.Nano()
	}
	return loadMark{at: time.Now(), cpu: cpu, ownNS: own}, nil
}

// stepLoad is what the host did between two marks around a step. A
// counter that went back (a CPU taken offline) counts as nothing rather
// than as wrapped.
func stepLoad(st scenario.Step, guest string, a, b loadMark) store.StepLoad {
	delta := func(x, y uint64) int64 {
		if y < x {
			return 0
		}
		return int64(y - x)
	}
	return store.StepLoad{
		Guest: guest, WorkloadID: st.WorkloadID, Repetition: st.Repetition,
		StartedNS: a.at.UnixNano(), WallNS: b.at.Sub(a.at).Nanoseconds(), CPUs: b.cpu.CPUs,
		TotalTicks: delta(a.cpu.Total, b.cpu.Total), TaskTicks: delta(a.cpu.Tasks, b.cpu.Tasks),
		StealTicks: delta(a.cpu.Steal, b.cpu.Steal), OwnNS: max(b.ownNS-a.ownNS, 0),
	}
}

// elsewhere says whether the named guest runs elsewhere (a pod): this
// host's load says nothing of its step, and where its node is this host
// the step's own work would read as another process's.
func (r *run) elsewhere(name string) bool {
	g, ok := r.guests[name]
	return ok && guest.TraitsOf(g.Spec()).Elsewhere
}

// measuringLoad runs a measured step (not a warm-up) between two reads
// of the host's load, and stores what the host did meanwhile. When either
// read fails the step's load is not stored: not read, never guessed.
func (r *run) measuringLoad(ctx context.Context, st scenario.Step, guest string, step func() error) error {
	if st.Warmup || r.elsewhere(guest) {
		return step()
	}
	mounts, merr := cgroup.Mounts(loadProcRoot)
	if merr != nil {
		return step()
	}
	before, berr := readLoadMark(loadProcRoot, mounts, r.together)
	err := step()
	after, aerr := readLoadMark(loadProcRoot, mounts, r.together)
	if berr != nil || aerr != nil {
		return err
	}
	if serr := r.opts.Store.AddStepLoad(context.WithoutCancel(ctx), r.id, stepLoad(st, guest, before, after)); serr != nil {
		r.storeFailed(serr)
	}
	return err
}
