package runner

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// noiseLead is how long aggressors run before the measurement starts, so
// it meets them at full strength rather than starting up.
const noiseLead = 500 * time.Millisecond

// aggressorArgv is the stress-ng command of a noise profile with one
// worker per noise CPU. It stops by itself after limit; the run stops it
// earlier, when the measured step ends.
func aggressorArgv(profile string, workers int, limit time.Duration) []string {
	n := strconv.Itoa(workers)
	var load []string
	switch profile {
	case "cpu":
		load = []string{"--cpu", n, "--cpu-method", "matrixprod"}
	case "memory":
		// Far larger than any cache, written in full: memory bandwidth.
		load = []string{"--vm", n, "--vm-bytes", "256M", "--vm-keep", "--vm-method", "write64"}
	case "io":
		load = []string{"--hdd", n, "--hdd-bytes", "64M"}
	case "network":
		// TCP over the aggressor's own loopback: the shared kernel's
		// network stack and softirq work, not the measured data path.
		load = []string{"--sock", n}
	}
	return append(append([]string{programs.StressNG.Name}, load...), "--timeout", strconv.Itoa(int(limit.Seconds())+1)+"s", "--quiet")
}

// startNoise starts the step's aggressors in every noise guest and
// returns the function that stops them. Without noise it does nothing.
func (r *run) startNoise(ctx context.Context, st scenario.Step) (stop func()) {
	if st.Noise == "" || st.Noise == scenario.NoiseNone || len(r.plan.NoiseGuests) == 0 {
		return func() {}
	}
	cpus, err := procfs.ParseCPUList(r.placed.noiseCPUs)
	if err != nil {
		r.opts.Progress.Logf("%snoise %s not started: %v", r.label, st.Noise, err)
		return func() {}
	}
	limit := 3*st.Duration + time.Minute
	argv := append([]string{"taskset", "-c", r.placed.noiseCPUs}, aggressorArgv(st.Noise, len(cpus), limit)...)
	// The aggressors stop when their context does: the agent is asked to
	// stop them, on the connection the measured work shares.
	nctx, stopAll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range r.plan.NoiseGuests {
		g := r.guests[name]
		if g == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.tools.require(nctx, g, r.records[name].Group, r.imageName(g), programs.StressNG.Name); err != nil {
				r.noiseFailed(ctx, g, st, err)
				return
			}
			reply, err := g.Exec(nctx, agent.Request{Argv: argv, Dir: g.Info().ScratchDir, TimeoutMS: limit.Milliseconds()})
			if err == nil && !reply.Succeeded() {
				err = execError(reply)
			}
			// Stopped at the step's end is the normal way; anything else
			// means the aggressor did not run for the whole step.
			if err != nil && nctx.Err() == nil {
				r.noiseFailed(ctx, g, st, err)
			}
		}()
	}
	time.Sleep(noiseLead)
	return func() {
		stopAll()
		wg.Wait()
	}
}

func (r *run) noiseFailed(ctx context.Context, g guest.Guest, st scenario.Step, err error) {
	err = fmt.Errorf("noise %s: %w", st.Noise, err)
	r.opts.Progress.Logf("%s%s: %v", r.label, g.Spec().Name, err)
	_ = r.failure(ctx, g.Spec().Name, r.records[g.Spec().Name].Group, st.WorkloadID, st.Repetition, err, nil)
}
