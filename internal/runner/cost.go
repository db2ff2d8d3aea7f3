package runner

import (
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/workload"
)

// costSamples derives what a network measurement cost the host from its
// CPU use over the measurement: busy cores, throughput per busy core, and
// CPU time per round trip. The host's whole CPU is counted (guest, host
// side and peer are all on it), so the figures mean most on an otherwise
// idle host.
//
// The busy cores are split as the microVM study reads them beside
// throughput: the guest's host processes in user mode (a VM's emulator:
// under TCG that is the emulated guest itself), the kernel's work wherever
// it lands (system time of every task, a tap's frames in the writing
// emulator thread's, and interrupts and softirqs), and everything else.
func costSamples(parsed []workload.Sample, use cpuUse) []workload.Sample {
	if use.TotalTicks == 0 || use.BusyTicks == 0 || use.CPUs == 0 {
		return nil
	}
	coresOf := func(ticks uint64) float64 { return float64(ticks) / float64(use.TotalTicks) * float64(use.CPUs) }
	cores := coresOf(use.BusyTicks)
	out := []workload.Sample{{Metric: "net.host_busy_cores", Unit: "cores", Value: cores, Better: workload.LowerIsBetter}}
	// The guest's share comes from its processes' own counters, the rest
	// from the CPUs': sampled apart, tick by tick, they may add up to a
	// tick or two more than the busy time when the guest is nearly all of
	// it (an emulated VM). The rest is then none, not negative.
	other := uint64(0)
	if parts := use.GuestUserTicks + use.KernelTicks; parts < use.BusyTicks {
		other = use.BusyTicks - parts
	}
	out = append(out,
		workload.Sample{Metric: "net.cpu.guest_user_cores", Unit: "cores", Value: coresOf(use.GuestUserTicks), Better: workload.LowerIsBetter},
		workload.Sample{Metric: "net.cpu.kernel_cores", Unit: "cores", Value: coresOf(use.KernelTicks), Better: workload.LowerIsBetter},
		workload.Sample{Metric: "net.cpu.other_cores", Unit: "cores", Value: coresOf(other), Better: workload.LowerIsBetter})
	if use.InGuest != nil {
		out = append(out, workload.Sample{Metric: "net.cpu.in_guest_cores", Unit: "cores", Value: *use.InGuest, Better: workload.LowerIsBetter})
	}
	// What the path costs the host kernel per unit of work: under
	// emulation the guest's vCPU is the bottleneck, so this, not the
	// throughput, tells the paths apart.
	kernelCores := coresOf(use.KernelTicks)
	for _, s := range parsed {
		switch {
		case s.Unit == "bit/s" && s.Better == workload.HigherIsBetter:
			out = append(out, workload.Sample{Metric: s.Metric + "_per_core", Unit: "bit/s per core", Value: s.Value / cores, Better: workload.HigherIsBetter})
			if s.Value > 0 {
				// CPU per byte moved, as the microVM study reads it, in ms of
				// CPU per Gbit: the host's whole, its kernel's, and the
				// guest's own kernel's view of its vCPUs.
				msPerGbit := func(cores float64) float64 { return cores / (s.Value / 1e9) * 1e3 }
				out = append(out,
					workload.Sample{Metric: "net.cpu.host_ms_per_gbit", Unit: "ms", Value: msPerGbit(cores), Better: workload.LowerIsBetter},
					workload.Sample{Metric: "net.cpu.kernel_ms_per_gbit", Unit: "ms", Value: msPerGbit(kernelCores), Better: workload.LowerIsBetter})
				if use.InGuest != nil {
					out = append(out, workload.Sample{Metric: "net.cpu.in_guest_ms_per_gbit", Unit: "ms", Value: msPerGbit(*use.InGuest), Better: workload.LowerIsBetter})
				}
			}
		case s.Hist != nil && s.Hist.Count() > 0:
			perTx := func(ticks uint64) float64 { return float64(ticks) / procfs.UserHZ * 1e6 / float64(s.Hist.Count()) }
			out = append(out,
				workload.Sample{Metric: "net.cpu_us_per_transaction", Unit: "us", Value: perTx(use.BusyTicks), Better: workload.LowerIsBetter},
				workload.Sample{Metric: "net.cpu.kernel_us_per_transaction", Unit: "us", Value: perTx(use.KernelTicks), Better: workload.LowerIsBetter})
		}
	}
	return out
}
