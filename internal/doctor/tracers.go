package doctor

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

// checkTracers says whether the host kernel can trace where a timer
// latency comes from (timerlat) and what interrupts a busy thread
// (osnoise). A latency figure is measured without them, so their absence
// is a caveat, never a failure. release is the kernel's uname -r and
// tracers what hostinfo found of each of hostinfo.LatencyTracers; vm, when
// known, says the same of the kernel vfleet's VM guests boot.
func checkTracers(release string, tracers map[string]string, vm string) Result {
	kernel := "host kernel"
	if release != "" {
		kernel += " " + release
	}
	described := hostinfo.DescribeTracers(tracers)
	if described == "" {
		described = "latency tracers unknown"
	}
	detail := kernel + ": " + described
	if vm != "" {
		detail += "; " + vm
	}
	if hostinfo.TracerUsable(tracers["timerlat"]) && hostinfo.TracerUsable(tracers["osnoise"]) {
		return Result{Status: OK, Detail: detail}
	}
	// Containers cannot bring their own kernel; VM guests trace with theirs.
	return Result{Status: Warn, Detail: detail + "; containers share it",
		Fix: "to trace latency spikes with rtla timerlat/osnoise, run a host kernel built with CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER " +
			"(Debian's linux-image-rt-amd64 has both); VM guests with kernel_flavour: rt have them in their own kernel"}
}

// vmKernelTracers describes the latency tracers of the kernel at
// kernelPath (an image's /boot/vmlinuz-RELEASE) from the build
// configuration beside it; "" when there is none to read.
func vmKernelTracers(kernelPath string) string {
	if kernelPath == "" {
		return ""
	}
	release := strings.TrimPrefix(filepath.Base(kernelPath), "vmlinuz-")
	f, err := os.Open(filepath.Join(filepath.Dir(kernelPath), "config-"+release))
	if err != nil {
		return ""
	}
	defer f.Close()
	return "VM guests' kernel " + release + ": " + hostinfo.DescribeTracers(hostinfo.TracerSupport(f))
}
