package doctor

import (
	"github.com/vfleet/vfleet/internal/hostinfo"
)

// checkTracers says whether the host kernel can trace where a timer
// latency comes from (timerlat) and what interrupts a busy thread
// (osnoise). A latency figure is measured without them, so their absence
// is a caveat, never a failure. release is the kernel's uname -r and
// tracers what hostinfo found of each of hostinfo.LatencyTracers.
func checkTracers(release string, tracers map[string]string) Result {
	kernel := "host kernel"
	if release != "" {
		kernel += " " + release
	}
	described := hostinfo.DescribeTracers(tracers)
	if described == "" {
		described = "latency tracers unknown"
	}
	detail := kernel + ": " + described
	if hostinfo.TracerUsable(tracers["timerlat"]) && hostinfo.TracerUsable(tracers["osnoise"]) {
		return Result{Status: OK, Detail: detail}
	}
	// Containers cannot bring their own kernel; VM guests trace with theirs.
	return Result{Status: Warn, Detail: detail + "; containers share it",
		Fix: "to trace latency spikes with rtla timerlat/osnoise, run a host kernel built with CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER " +
			"(Debian's linux-image-rt-amd64 has both)"}
}
