package hostinfo

import (
	"bufio"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/procfs"
	"golang.org/x/sys/unix"
)

// RealTime is what shapes a real-time latency result besides the CPU: how
// preemptible the kernel is, how much of the CPU real-time tasks may take,
// which CPUs are kept clear of scheduler balancing and of the tick, where
// interrupts may land, and whether the kernel's own latency tracers can be
// used to explain a spike.
type RealTime struct {
	// Preemption is the kernel's preemption model: "rt" (PREEMPT_RT),
	// "dynamic" or "dynamic (preempt=X)" when the boot command line chose
	// the mode, "full", "lazy", "voluntary", "none", or empty when neither
	// the kernel's version string nor its build configuration says.
	Preemption string `json:"preemption,omitempty"`
	// Real-time tasks may run RTRuntimeUS of every RTPeriodUS microseconds
	// before the scheduler throttles them for the rest of the period, which
	// caps how long a spinning RT task can starve the others. A runtime of
	// -1 means RT throttling is off. Both are 0 when the kernel does not
	// expose them.
	RTRuntimeUS int64 `json:"rt_runtime_us"`
	RTPeriodUS  int64 `json:"rt_period_us"`
	// IsolatedCPUs (isolcpus=) are kept out of scheduler load balancing and
	// NohzFull (nohz_full=) run without the periodic tick while they have a
	// single task; both are kernel CPU lists, empty when there are none.
	IsolatedCPUs string `json:"isolated_cpus,omitempty"`
	NohzFull     string `json:"nohz_full,omitempty"`
	// IRQsPerCPU counts, for each online CPU, the interrupts whose affinity
	// lets them be delivered to it (the effective affinity where the kernel
	// reports one): an isolated CPU that still takes interrupts is not quiet.
	IRQsPerCPU map[int]int `json:"irqs_per_cpu,omitempty"`
	// Tracers says, for each of LatencyTracers, whether the kernel can
	// trace where a latency came from: TracerAvailable, TracerBuiltIn
	// followed by why tracefs could not confirm it, TracerAbsent or
	// TracerUnknown.
	Tracers map[string]string `json:"tracers,omitempty"`
	// SetByRun lists what the run itself set while it lasted (a scenario's
	// host_settings), as "name=value"; the fields above then describe the
	// host as the run measured it, not as it was before.
	SetByRun []string `json:"set_by_run,omitempty"`
}

// LatencyTracers are the ftrace tracers that explain scheduling latency and
// jitter, in the order reports name them: timerlat traces a timer wakeup
// like cyclictest's down to the interrupt and thread, osnoise accounts for
// every interruption of a busy thread, and hwlat finds what the hardware or
// firmware steals below the kernel.
var LatencyTracers = []string{"timerlat", "osnoise", "hwlat"}

// tracerConfig names the kernel build option behind each latency tracer.
// All three are booleans: the tracers cannot be modules.
var tracerConfig = map[string]string{
	"timerlat": "CONFIG_TIMERLAT_TRACER",
	"osnoise":  "CONFIG_OSNOISE_TRACER",
	"hwlat":    "CONFIG_HWLAT_TRACER",
}

// A tracer's status in RealTime.Tracers.
const (
	TracerAvailable = "available"          // listed by the running kernel's tracefs
	TracerBuiltIn   = "built in"           // the build configuration has it
	TracerAbsent    = "not in this kernel" // neither lists nor configures it
	TracerUnknown   = "unknown"            // no tracefs and no configuration to read
)

// TracerUsable reports whether a status from RealTime.Tracers or
// TracerSupport means the tracer can be used: a built-in tracer only needs
// tracefs mounted, which rtla does by itself.
func TracerUsable(status string) bool {
	return status == TracerAvailable || strings.HasPrefix(status, TracerBuiltIn)
}

// DescribeTracers writes a tracer status map in LatencyTracers order,
// tracers that share a status named together:
// "timerlat, osnoise available; hwlat not in this kernel". It is empty when
// the map is.
func DescribeTracers(tracers map[string]string) string {
	var statuses []string
	names := map[string][]string{}
	for _, t := range LatencyTracers {
		s, ok := tracers[t]
		if !ok {
			continue
		}
		if names[s] == nil {
			statuses = append(statuses, s)
		}
		names[s] = append(names[s], t)
	}
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		parts[i] = strings.Join(names[s], ", ") + " " + s
	}
	return strings.Join(parts, "; ")
}

// TracerSupport reads a kernel build configuration (a /boot/config-*
// file, or /proc/config.gz decompressed) and says for each of
// LatencyTracers whether that kernel has it: TracerBuiltIn, TracerAbsent,
// or TracerUnknown when the configuration could not be read whole. It says
// nothing about whether tracefs is mounted where that kernel runs.
func TracerSupport(config io.Reader) map[string]string {
	kc, err := parseKernelConfig(config)
	return kc.tracerSupport(err == nil && len(kc) > 0)
}

// kernelConfig maps a kernel build option to its value ("y", "m", a
// number or a quoted string); an option the file says "is not set" maps
// to "n".
type kernelConfig map[string]string

// parseKernelConfig reads a kernel .config. What it read before an error
// is returned with it.
func parseKernelConfig(r io.Reader) (kernelConfig, error) {
	kc := kernelConfig{}
	sc := bufio.NewScanner(r)
	// CONFIG_CMDLINE and friends can be long.
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(line, "# "); ok {
			if name, ok := strings.CutSuffix(c, " is not set"); ok && strings.HasPrefix(name, "CONFIG_") {
				kc[name] = "n"
			}
			continue
		}
		if name, val, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, "CONFIG_") {
			kc[name] = val
		}
	}
	return kc, sc.Err()
}

// tracerSupport says what the configuration says of each latency tracer.
// Kconfig writes every option whose dependencies are met, set or not, so
// in a complete configuration an option it does not mention is off; in
// an incomplete one it is unknown.
func (kc kernelConfig) tracerSupport(complete bool) map[string]string {
	out := make(map[string]string, len(LatencyTracers))
	for _, t := range LatencyTracers {
		v, ok := kc[tracerConfig[t]]
		switch {
		case v == "y":
			out[t] = TracerBuiltIn
		case ok || complete:
			out[t] = TracerAbsent
		default:
			out[t] = TracerUnknown
		}
	}
	return out
}

// listedTracers reads tracefs's available_tracers: the running kernel's
// own answer, so a tracer it does not list is not in it.
func listedTracers(available string) map[string]string {
	have := strings.Fields(available)
	out := make(map[string]string, len(LatencyTracers))
	for _, t := range LatencyTracers {
		if slices.Contains(have, t) {
			out[t] = TracerAvailable
		} else {
			out[t] = TracerAbsent
		}
	}
	return out
}

// preemption names the preemption model from the kernel's version string
// (uname -v), the content of /sys/kernel/realtime, the boot command line
// and, when it could be read, the build configuration.
//
// The version string carries one flag: PREEMPT_RT, else PREEMPT_DYNAMIC,
// else PREEMPT for any build that preempts in the kernel (full, and lazy
// since 6.13), else none at all for voluntary and no preemption; the
// configuration tells those apart. Kernels with the out-of-tree RT patch
// wrote "PREEMPT RT" up to 5.2, and only the patch has /sys/kernel/realtime:
// mainline RT kernels lack it.
func preemption(version, realtime, cmdline string, kc kernelConfig) string {
	if strings.TrimSpace(realtime) == "1" {
		return "rt"
	}
	f := strings.Fields(version)
	i := slices.Index(f, "PREEMPT")
	switch {
	case slices.Contains(f, "PREEMPT_RT") || (i >= 0 && i+1 < len(f) && f[i+1] == "RT"):
		return "rt"
	case slices.Contains(f, "PREEMPT_DYNAMIC"):
		// The mode can still be switched at run time through debugfs,
		// which is not readable everywhere; the boot choice is what
		// stands unless someone switched it.
		if m := bootParam(cmdline, "preempt"); m != "" {
			return "dynamic (preempt=" + m + ")"
		}
		return "dynamic"
	case i >= 0:
		if kc["CONFIG_PREEMPT_LAZY"] == "y" {
			return "lazy"
		}
		return "full"
	case kc["CONFIG_PREEMPT_VOLUNTARY"] == "y":
		return "voluntary"
	case kc["CONFIG_PREEMPT_NONE"] == "y":
		return "none"
	}
	return ""
}

// bootParam is the value of the last key=value parameter of a kernel
// command line, which is the one the kernel acts on; what follows "--"
// is init's.
func bootParam(cmdline, key string) string {
	var v string
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break
		}
		if val, ok := strings.CutPrefix(f, key+"="); ok {
			v = val
		}
	}
	return v
}

// cpuListFile reads a sysfs CPU list that may be absent or empty. Kernels
// that never allocated the mask print "(null)" for it.
func cpuListFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		return ""
	}
	return s
}

// intFile reads a file holding one integer, 0 when it cannot.
func intFile(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// irqsPerCPU counts, for each CPU of online, the interrupts under irqDir
// (/proc/irq) that may be delivered to it; with online unknown it counts
// every CPU an interrupt names. It is nil when irqDir cannot be read.
func irqsPerCPU(irqDir string, online []int) map[int]int {
	ents, err := os.ReadDir(irqDir)
	if err != nil {
		return nil
	}
	counts := make(map[int]int, len(online))
	for _, c := range online {
		counts[c] = 0
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || !e.IsDir() {
			continue
		}
		for _, c := range irqAffinity(filepath.Join(irqDir, e.Name())) {
			if _, ok := counts[c]; ok || online == nil {
				counts[c]++
			}
		}
	}
	return counts
}

// irqAffinity is where one interrupt may be delivered. The effective
// affinity is where the interrupt controller really sends it, often one
// CPU of a wider allowed mask; it is absent on older kernels and empty for
// an interrupt not yet started, and then the allowed mask is all we know.
func irqAffinity(dir string) []int {
	for _, name := range []string{"effective_affinity_list", "smp_affinity_list"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if cpus, err := procfs.ParseCPUList(string(b)); err == nil {
			return cpus
		}
	}
	return nil
}

// loadKernelConfig reads the running kernel's build configuration: the
// kernel's own copy in /proc when it keeps one, else the one installed
// beside it in /boot. complete is false when it is missing or was cut.
func loadKernelConfig(opts Options, release string) (kc kernelConfig, complete bool) {
	if kc, err := readKernelConfig(filepath.Join(opts.ProcRoot, "config.gz"), true); err == nil && len(kc) > 0 {
		return kc, true
	}
	if release == "" {
		return nil, false
	}
	kc, err := readKernelConfig(filepath.Join(opts.BootRoot, "config-"+release), false)
	return kc, err == nil && len(kc) > 0
}

// readKernelConfig parses the kernel configuration at path.
func readKernelConfig(path string, gzipped bool) (kernelConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if gzipped {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		r = zr
	}
	return parseKernelConfig(r)
}

// kernelTracers says which latency tracers the running kernel offers.
// tracefs's list is authoritative; where tracefs is not mounted (or not
// readable by this user) the build configuration says whether they are
// built in, and the status says why it could not be confirmed.
func kernelTracers(opts Options, kc kernelConfig, complete bool) map[string]string {
	why := "tracefs not mounted"
	for _, dir := range []string{"kernel/tracing", "kernel/debug/tracing"} {
		b, err := os.ReadFile(filepath.Join(opts.SysRoot, dir, "available_tracers"))
		if err == nil {
			return listedTracers(string(b))
		}
		if errors.Is(err, fs.ErrPermission) {
			why = "tracefs not readable"
		}
	}
	st := kc.tracerSupport(complete)
	for t, s := range st {
		if s == TracerBuiltIn {
			st[t] = s + " (" + why + ")"
		}
	}
	return st
}

// HostTracers says which latency tracers the running kernel offers, as
// Collect records them, and names that kernel (uname -r).
func HostTracers(opts Options) (release string, tracers map[string]string) {
	opts = opts.withDefaults()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	kc, complete := loadKernelConfig(opts, release)
	return release, kernelTracers(opts, kc, complete)
}

// CollectRealTime gathers RealTime for the running kernel.
func CollectRealTime(opts Options) RealTime {
	opts = opts.withDefaults()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return RealTime{}
	}
	return collectRealTime(opts, unix.ByteSliceToString(uts.Release[:]), unix.ByteSliceToString(uts.Version[:]))
}

// collectRealTime gathers RealTime for the kernel whose release (uname -r)
// and version (uname -v) are given. Every piece is optional: what cannot
// be read is left empty.
func collectRealTime(opts Options, release, version string) RealTime {
	var rt RealTime
	kc, complete := loadKernelConfig(opts, release)
	realtime, _ := os.ReadFile(filepath.Join(opts.SysRoot, "kernel", "realtime"))
	cmdline, _ := os.ReadFile(filepath.Join(opts.ProcRoot, "cmdline"))
	rt.Preemption = preemption(version, string(realtime), string(cmdline), kc)

	sched := filepath.Join(opts.ProcRoot, "sys", "kernel")
	rt.RTRuntimeUS = intFile(filepath.Join(sched, "sched_rt_runtime_us"))
	rt.RTPeriodUS = intFile(filepath.Join(sched, "sched_rt_period_us"))

	cpuDir := filepath.Join(opts.SysRoot, "devices", "system", "cpu")
	rt.IsolatedCPUs = cpuListFile(filepath.Join(cpuDir, "isolated"))
	rt.NohzFull = cpuListFile(filepath.Join(cpuDir, "nohz_full"))
	online, _ := procfs.ParseCPUList(cpuListFile(filepath.Join(cpuDir, "online")))
	rt.IRQsPerCPU = irqsPerCPU(filepath.Join(opts.ProcRoot, "irq"), online)

	rt.Tracers = kernelTracers(opts, kc, complete)
	return rt
}
