package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// errAllOrNothing ends a run whose scenario wants every guest or none.
var errAllOrNothing = errors.New("fleet.all_or_nothing: a guest failed to start")

// cpuSysDir is where the host's CPU topology is read.
const cpuSysDir = "/sys/devices/system/cpu"

// placeGuests applies the scenario's pinning before anything starts.
func (r *run) placeGuests() error {
	spec := r.plan.Spec
	if spec.Fleet == nil && spec.Noise == nil {
		return nil
	}
	cpus, err := readTopology(cpuSysDir)
	if err != nil {
		return err
	}
	if r.placed, err = place(r.plan, cpus); err != nil {
		return err
	}
	r.opts.Progress.Logf("%s%s", r.label, r.placed.summary)
	return nil
}

// startPhase starts the guests the phase needs that are not running yet
// and, in a fleet, stores how long the launch took.
func (r *run) startPhase(ctx context.Context, phase int) error {
	ph := r.plan.Phases[phase]
	if ph.Kind.OwnsNetwork() {
		r.opts.Progress.Logf("%s%s on %s: building the network and starting its peer", r.label, ph.Path, r.plan.Spec.Network.Uplink)
		if err := r.buildNetwork(ctx, ph.Guests); err != nil {
			return err
		}
	}
	var missing []string
	for _, name := range ph.Guests {
		if r.guests[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	began := time.Now()
	err := r.startGuests(ctx, missing)
	if len(r.launched) > 0 {
		elapsed := time.Since(began)
		r.opts.Progress.Logf("%s%d of %d guests ready in %s (%.1f per second)", r.label, len(r.launched), len(missing),
			elapsed.Round(time.Millisecond), float64(len(r.launched))/elapsed.Seconds())
	}
	if err == nil {
		err = r.audit(ctx, missing)
	}
	if err != nil || r.plan.Spec.Fleet == nil {
		return err
	}
	if err := r.storeLaunch(ctx, ph); err != nil {
		return err
	}
	return r.storeDensity(ctx, ph)
}

// Launch samples: a pseudo-workload of their own (workload.LaunchWorkload),
// so the launch of every fleet size lands in the report's tables and
// scaling curves, counted as footprint, not as a workload's performance.
const (
	metricReady       = "launch.ready_s"
	metricGroupReady  = "launch.all_ready_s"
	metricGroupPerSec = "launch.guests_per_s"
	// metricPhase prefixes, per group, the tail over the group's guests
	// of a phase of their start that their kind tells (guest.Info.Phases),
	// as kube-burner reports pod start-up; each guest's own time to ready
	// is metricReady.
	metricPhase = workload.PhasePrefix
)

// storeLaunch records each started guest's time to agent-ready and, per
// group, when its last guest was ready and the launch rate.
func (r *run) storeLaunch(ctx context.Context, ph scenario.Phase) error {
	params, noise := phaseParams(ph), r.noiseGuests()
	now := time.Now().UTC()
	sample := func(name, group, kind, runtime, metric, unit string, v float64, better workload.Better) store.Sample {
		return store.Sample{RunID: r.id, Guest: name, Group: group, Kind: kind, Runtime: runtime, WorkloadID: workload.LaunchWorkload,
			Workload: workload.LaunchWorkload, Params: params, Metric: metric, Unit: unit, Value: v, Better: better, At: now}
	}
	type groupLaunch struct {
		kind, runtime string
		last          time.Duration
		n             int
		phases        []string // in the order the guests passed them
		after         map[string][]float64
	}
	groups := map[string]*groupLaunch{}
	var samples []store.Sample
	for name, readyAfter := range r.launched {
		if noise[name] {
			continue
		}
		g := r.guests[name]
		rec := r.records[name]
		samples = append(samples, sample(name, rec.Group, rec.Kind, rec.Runtime, metricReady, "s", g.Info().BootTime.Seconds(), workload.LowerIsBetter))
		gl := groups[rec.Group]
		if gl == nil {
			gl = &groupLaunch{kind: rec.Kind, runtime: rec.Runtime}
			groups[rec.Group] = gl
		}
		gl.n++
		gl.last = max(gl.last, readyAfter)
		for _, ph := range g.Info().Phases {
			if gl.after == nil {
				gl.after = map[string][]float64{}
			}
			if _, ok := gl.after[ph.Name]; !ok {
				gl.phases = append(gl.phases, ph.Name)
			}
			gl.after[ph.Name] = append(gl.after[ph.Name], ph.After.Seconds())
		}
	}
	for group, gl := range groups {
		samples = append(samples,
			sample(group, group, gl.kind, gl.runtime, metricGroupReady, "s", gl.last.Seconds(), workload.LowerIsBetter),
			sample(group, group, gl.kind, gl.runtime, metricGroupPerSec, "guests/s", float64(gl.n)/gl.last.Seconds(), workload.HigherIsBetter))
		for _, phase := range gl.phases {
			tail := stats.TailOf(gl.after[phase])
			for _, q := range []struct {
				name string
				v    float64
			}{{"p50", tail.P50}, {"p95", tail.P95}, {"p99", tail.P99}, {"max", tail.Max}} {
				samples = append(samples, sample(group, group, gl.kind, gl.runtime, metricPhase+phase+"."+q.name+"_s", "s", q.v, workload.LowerIsBetter))
			}
		}
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].Guest < samples[j].Guest })
	return r.storeSamples(ctx, samples)
}

// phaseParams are the parameters of what a phase stores about its fleet
// (launch, density): its size, when the run sweeps sizes.
func phaseParams(ph scenario.Phase) workload.Params {
	params := workload.Params{}
	if ph.Kind == scenario.PhaseFleetSize {
		params[scenario.LabelFleetSize] = strconv.Itoa(ph.FleetSize)
	}
	return params
}

// noiseGuests is the set of guests that run aggressors, which are not
// part of the fleet being measured.
func (r *run) noiseGuests() map[string]bool {
	noise := map[string]bool{}
	for _, n := range r.plan.NoiseGuests {
		noise[n] = true
	}
	return noise
}

// endPhase stops the guests that belong to this phase alone, so the next
// fleet size is launched afresh, and takes down a path's network, so the
// next path gets the NIC; the last phase's are left to the run's
// teardown.
func (r *run) endPhase(ctx context.Context, phase int) error {
	if phase == len(r.plan.Phases)-1 {
		return nil
	}
	ph := r.plan.Phases[phase]
	err := r.stopGuests(ctx, ph.Scaled)
	if ph.Kind.OwnsNetwork() {
		// The NIC goes back to the host before the next path takes it.
		err = errors.Join(err, r.closeNetwork(ctx))
	}
	return err
}

// Timing of a synchronized start: the moment is set far enough ahead for
// every request to arrive and every tool to be loaded and held by its
// start gate, growing with the fleet since requests go out from one
// process and the tools load on the same CPUs. A tool ready after the
// moment starts late, so the lead errs long: 100 fio loads took 0.4-0.8 s
// on two CPUs.
const (
	togetherLead         = 200 * time.Millisecond
	togetherLeadPerGuest = 10 * time.Millisecond
)

// runTogether starts the step in all its guests at one moment: each
// agent's clock offset is measured, the moment translated to each clock,
// and every guest's request sent at once. Each guest's samples are stored
// as usual, and per group the sum of its rates and how well the guests'
// runs overlapped.
func (r *run) runTogether(ctx context.Context, st scenario.Step) error {
	type member struct {
		g      guest.Guest
		offset time.Duration
		m      measurement
		err    error
	}
	var members []*member
	for _, name := range st.Together {
		g := r.guests[name]
		if g == nil {
			continue // it failed to start, which is recorded already
		}
		members = append(members, &member{g: g})
	}
	if len(members) == 0 {
		return errors.New("no guest of the step is running")
	}
	done := r.opts.Observer.StepStarted(StepEvent{RunID: r.id, Guest: fmt.Sprintf("%d guests", len(members)), WorkloadID: st.WorkloadID,
		Workload: st.Workload, Params: st.Params, Repetition: st.Repetition, Warmup: st.Warmup})
	parallel(members, func(m *member) {
		m.offset, _, m.err = agent.ClockOffset(ctx, m.g.Exec)
	})
	stopNoise := r.startNoise(ctx, st)
	start := time.Now().Add(togetherLead + time.Duration(len(members))*togetherLeadPerGuest)
	var vcpus int
	for _, m := range members {
		vcpus += max(m.g.Spec().VCPUs, 1)
	}
	stretch := r.placed.stretch(vcpus)
	parallel(members, func(m *member) {
		if m.err != nil {
			return
		}
		m.m, m.err = r.measure(ctx, m.g, st, start.Add(m.offset).UnixNano(), stretch)
	})
	stopNoise()
	var errs []error
	var stored []store.Sample
	var windows []window
	for _, m := range members {
		if m.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.g.Spec().Name, m.err))
		}
		if m.err != nil && len(m.m.parsed) == 0 || st.Warmup {
			continue
		}
		samples, err := r.record(ctx, m.g, st, m.m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stored = append(stored, samples...)
		// Back to the host's clock, where all guests' runs line up.
		start := time.Unix(0, m.m.reply.StartedUnixNS).Add(-m.offset)
		windows = append(windows, window{
			group:    r.records[m.g.Spec().Name].Group,
			start:    start,
			firstRan: start.Add(time.Duration(m.m.reply.StartWaitNS)),
			end:      time.Unix(0, m.m.reply.EndedUnixNS).Add(-m.offset),
		})
	}
	if len(stored) > 0 {
		if err := r.storeFleetTotals(ctx, st, stored, windows); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	done(err)
	return err
}

func parallel[T any](items []T, fn func(T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(it)
		}()
	}
	wg.Wait()
}

// window is when one guest's run of a step ran, on the host's clock:
// started (let go), first on a CPU, ended.
type window struct {
	group                string
	start, firstRan, end time.Time
}

// summable reports whether a metric is a rate whose sum over guests is
// the fleet's aggregate (operations, bytes or bits per second).
func summable(unit string) bool {
	return strings.HasSuffix(unit, "/s") || unit == "IOPS"
}

// storeFleetTotals adds, per group, the sum of each rate over its guests,
// the overlap of their runs and the skew of their starts, stored under the
// group's name as guest.
func (r *run) storeFleetTotals(ctx context.Context, st scenario.Step, samples []store.Sample, windows []window) error {
	type key struct{ group, metric string }
	sums := map[key]store.Sample{}
	var order []key
	for _, s := range samples {
		if !summable(s.Unit) || math.IsNaN(s.Value) {
			continue
		}
		k := key{s.Group, s.Metric}
		agg, ok := sums[k]
		if !ok {
			agg = s
			agg.Guest, agg.Metric, agg.Value, agg.Hist, agg.CPUNS, agg.WallNS = s.Group, workload.TotalPrefix+s.Metric, 0, nil, 0, 0
			order = append(order, k)
		}
		agg.Value += s.Value
		sums[k] = agg
	}
	var out []store.Sample
	for _, k := range order {
		out = append(out, sums[k])
	}
	byGroup := map[string][]window{}
	for _, w := range windows {
		byGroup[w.group] = append(byGroup[w.group], w)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, group := range groups {
		ws := byGroup[group]
		overlap, skew := overlapOf(ws)
		firstRun := spreadOf(ws, func(w window) time.Time { return w.firstRan })
		var like store.Sample
		for _, s := range samples {
			if s.Group == group {
				like = s
				break
			}
		}
		like.Guest, like.Hist, like.CPUNS, like.WallNS = group, nil, 0, 0
		o, sk, fr := like, like, like
		o.Metric, o.Unit, o.Value, o.Better = workload.MetricOverlap, "%", overlap*100, workload.HigherIsBetter
		sk.Metric, sk.Unit, sk.Value, sk.Better = workload.MetricStartSkew, "us", float64(skew.Microseconds()), workload.LowerIsBetter
		fr.Metric, fr.Unit, fr.Value, fr.Better = workload.MetricFirstRunSpread, "us", float64(firstRun.Microseconds()), workload.LowerIsBetter
		out = append(out, o, sk, fr)
	}
	return r.storeSamples(ctx, out)
}

// spreadOf is the time between the earliest and the latest of a moment
// of the runs.
func spreadOf(ws []window, moment func(window) time.Time) time.Duration {
	if len(ws) == 0 {
		return 0
	}
	first, last := moment(ws[0]), moment(ws[0])
	for _, w := range ws {
		if t := moment(w); t.Before(first) {
			first = t
		} else if t.After(last) {
			last = t
		}
	}
	return last.Sub(first)
}

// overlapOf returns the common window of the runs as a share of their
// mean length, and the spread of their starts.
func overlapOf(ws []window) (overlap float64, skew time.Duration) {
	if len(ws) == 0 {
		return 0, 0
	}
	skew = spreadOf(ws, func(w window) time.Time { return w.start })
	commonStart, commonEnd := ws[0].start, ws[0].end
	var total time.Duration
	for _, w := range ws {
		if w.start.After(commonStart) {
			commonStart = w.start
		}
		if w.end.Before(commonEnd) {
			commonEnd = w.end
		}
		total += w.end.Sub(w.start)
	}
	mean := total / time.Duration(len(ws))
	if mean <= 0 || !commonEnd.After(commonStart) {
		return 0, skew
	}
	return float64(commonEnd.Sub(commonStart)) / float64(mean), skew
}
