package runner

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/procfs"

	"github.com/vfleet/vfleet/internal/scenario"
)

// hostCPU is one online CPU and where it sits.
type hostCPU struct{ id, core, pkg int }

// readTopology lists the online CPUs under sysDir (/sys/devices/system/cpu)
// with their core and package.
func readTopology(sysDir string) ([]hostCPU, error) {
	b, err := os.ReadFile(filepath.Join(sysDir, "online"))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	ids, err := procfs.ParseCPUList(string(b))
	if err != nil {
		return nil, err
	}
	cpus := make([]hostCPU, 0, len(ids))
	for _, id := range ids {
		c := hostCPU{id: id, core: id}
		topo := filepath.Join(sysDir, fmt.Sprintf("cpu%d", id), "topology")
		// A kernel without topology files (some VMs) has one core per CPU.
		if v, err := readInt(filepath.Join(topo, "core_id")); err == nil {
			c.core = v
		}
		if v, err := readInt(filepath.Join(topo, "physical_package_id")); err == nil {
			c.pkg = v
		}
		cpus = append(cpus, c)
	}
	return cpus, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// spreadOrder orders CPUs so that each next one is as far as possible from
// those before it: one per package in turn, within a package a new core
// before a second thread of a used one. Taking the first N of the order
// places N guests as far apart as the topology allows.
func spreadOrder(cpus []hostCPU) []int {
	type coreKey struct{ pkg, core int }
	threads := map[coreKey][]int{}
	var cores []coreKey
	for _, c := range cpus {
		k := coreKey{c.pkg, c.core}
		if threads[k] == nil {
			cores = append(cores, k)
		}
		threads[k] = append(threads[k], c.id)
	}
	sort.Slice(cores, func(i, j int) bool {
		if cores[i].core != cores[j].core {
			return cores[i].core < cores[j].core
		}
		return cores[i].pkg < cores[j].pkg
	})
	// Rank each CPU by (thread index, core index within its package,
	// package): first threads of every core round-robin over packages,
	// then second threads.
	type ranked struct{ thread, slot, pkg, id int }
	var all []ranked
	slots := map[int]int{}
	for _, k := range cores {
		slot := slots[k.pkg]
		slots[k.pkg]++
		for t, id := range threads[k] {
			all = append(all, ranked{t, slot, k.pkg, id})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.thread != b.thread {
			return a.thread < b.thread
		}
		if a.slot != b.slot {
			return a.slot < b.slot
		}
		return a.pkg < b.pkg
	})
	out := make([]int, len(all))
	for i, r := range all {
		out[i] = r.id
	}
	return out
}

// placement is where a run puts its guests and aggressors.
type placement struct {
	// noiseCPUs is the aggressors' cpuset; empty without noise.
	noiseCPUs string
	// hostCPUs confines the measured work of bare-host guests, which take
	// no cpuset, when reserve or noise took CPUs: their tools run under
	// taskset. Empty when the whole host is the pool.
	hostCPUs string
	// details are stored with each guest's record.
	details map[string]map[string]string
	// summary says it in a line, for the progress log.
	summary string
	// poolCPUs is how many CPUs the measured guests share; 0 when the run
	// places nothing, and they share the whole host.
	poolCPUs int
	// pins are the guests the run places itself, by name: the plan is the
	// caller's, so the pins join a guest's spec only as it starts (on).
	pins map[string]guestPin
}

// guestPin is where the run puts one guest: a cpuset, or a VM's vCPU pinning.
type guestPin struct{ cpus, vcpus string }

// on is spec with the run's pin of its guest, if the run placed it.
func (pl placement) on(spec guest.Spec) guest.Spec {
	if p, ok := pl.pins[spec.Name]; ok {
		spec.CPUs, spec.PinVCPUs = cmp.Or(p.cpus, spec.CPUs), cmp.Or(p.vcpus, spec.PinVCPUs)
	}
	return spec
}

// stretch is how many of vcpus busy vCPUs (or single-threaded tools)
// share each CPU of the guests' pool, at least 1: how much slower each
// runs than alone.
func (pl placement) stretch(vcpus int) float64 {
	pool := pl.poolCPUs
	if pool == 0 {
		pool = runtime.NumCPU()
	}
	return max(float64(vcpus)/float64(pool), 1)
}

// place resolves the scenario's pinning of plan's guests, leaving plan as
// it is: a container gets a cpuset, a VM its vCPU pinning. Guests whose
// group pins them itself and bare-host guests (which take no cpuset: the
// baseline runs where the host scheduler puts it) are left alone.
func place(plan *scenario.Plan, cpus []hostCPU) (placement, error) {
	pl := placement{details: map[string]map[string]string{}, pins: map[string]guestPin{}}
	spec := plan.Spec
	pin := scenario.Pinning{Strategy: scenario.PinNone}
	if spec.Fleet != nil {
		pin = spec.Fleet.Pinning
	}
	online := make([]int, len(cpus))
	for i, c := range cpus {
		online[i] = c.id
	}
	taken := map[int]bool{}
	if pin.Reserve >= len(online) {
		return pl, fmt.Errorf("fleet.pinning.reserve %d leaves no CPU for guests on this %d-CPU host", pin.Reserve, len(online))
	}
	for _, id := range online[:pin.Reserve] {
		taken[id] = true
	}
	if spec.Noise != nil {
		noise, err := noiseCPUs(spec.Noise.CPUs, online)
		if err != nil {
			return pl, err
		}
		for _, id := range noise {
			taken[id] = true
		}
		pl.noiseCPUs = procfs.FormatCPUList(noise)
	}
	var pool []int
	for _, id := range spreadOrder(cpus) {
		if !taken[id] {
			pool = append(pool, id)
		}
	}
	if len(pool) == 0 {
		return pl, fmt.Errorf("no CPU is left for the measured guests on this %d-CPU host once the reserved and noise CPUs (%s) are taken", len(online), pl.noiseCPUs)
	}
	pl.poolCPUs = len(pool)
	sortedPool := append([]int(nil), pool...)
	sort.Ints(sortedPool)
	if len(pool) < len(online) {
		pl.hostCPUs = procfs.FormatCPUList(sortedPool)
	}
	noiseGuests := map[string]bool{}
	for _, n := range plan.NoiseGuests {
		noiseGuests[n] = true
	}
	next, wanted := 0, 0
	for _, pg := range plan.Guests {
		g := pg.Spec
		bare := guest.TraitsOf(g).Bare
		switch {
		case noiseGuests[g.Name]:
			if !bare {
				pl.pins[g.Name] = guestPin{cpus: pl.noiseCPUs}
			}
			pl.details[g.Name] = map[string]string{"pinning": "noise", "pinned_cpus": pl.noiseCPUs}
			continue
		case bare && pl.hostCPUs != "":
			pl.details[g.Name] = map[string]string{"pinning": "taskset", "pinned_cpus": pl.hostCPUs}
			continue
		case bare || g.CPUs != "" || g.PinVCPUs != "":
			continue
		}
		var mine []int
		if pin.Strategy == scenario.PinSpread {
			n := max(g.VCPUs, 1)
			for j := 0; j < n; j++ {
				mine = append(mine, pool[next%len(pool)])
				next++
			}
			wanted += n
		} else if len(pool) < len(online) {
			mine = sortedPool
		}
		if mine == nil {
			continue
		}
		list := procfs.FormatCPUList(mine)
		if guest.TraitsOf(g).PinsVCPUs {
			pl.pins[g.Name] = guestPin{vcpus: list}
		} else {
			pl.pins[g.Name] = guestPin{cpus: list}
		}
		pl.details[g.Name] = map[string]string{"pinning": pin.Strategy, "pinned_cpus": list}
	}
	pl.summary = fmt.Sprintf("pinning %s over CPUs %s", pin.Strategy, procfs.FormatCPUList(sortedPool))
	if wanted > len(pool) {
		ratio := fmt.Sprintf("%.2f", float64(wanted)/float64(len(pool)))
		pl.summary += fmt.Sprintf(", oversubscribed %s× (%d CPUs wanted)", ratio, wanted)
		for _, d := range pl.details {
			if d["pinning"] == scenario.PinSpread {
				d["oversubscription"] = ratio
			}
		}
	}
	if pl.noiseCPUs != "" {
		pl.summary += ", aggressors on CPUs " + pl.noiseCPUs
	}
	return pl, nil
}

// noiseCPUs resolves the noise section's cpuset: the first half of the
// online CPUs unless given, and never all of them.
func noiseCPUs(list string, online []int) ([]int, error) {
	if len(online) < 2 {
		return nil, fmt.Errorf("noise needs a CPU of its own apart from the measured guests; this host has %d", len(online))
	}
	if list == "" {
		return online[:len(online)/2], nil
	}
	cpus, err := procfs.ParseCPUList(list)
	if err != nil {
		return nil, fmt.Errorf("noise.cpus: %w", err)
	}
	isOnline := map[int]bool{}
	for _, id := range online {
		isOnline[id] = true
	}
	for _, id := range cpus {
		if !isOnline[id] {
			return nil, fmt.Errorf("noise.cpus %q: CPU %d is not online (online: %s)", list, id, procfs.FormatCPUList(online))
		}
	}
	return cpus, nil
}
