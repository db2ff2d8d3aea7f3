package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/ksm"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// Options wire the checks to the rest of vfleet without importing it.
type Options struct {
	// KernelPath is the guest image's kernel, empty when there is no image.
	KernelPath string
	// ImagePackages are the guest image's Debian package versions, nil
	// when the image is not built.
	ImagePackages map[string]string
	// SysRoot is where sysfs is mounted; empty means /sys.
	SysRoot string
	// KVMTimeout and TCGTimeout bound the boot probes; zero means 10 s and
	// 60 s. A kernel reaches its root mount in about a second under KVM
	// and well under a minute under emulation.
	KVMTimeout, TCGTimeout time.Duration
}

// runtimeProbeTimeout bounds one container start, image-less and tiny.
const runtimeProbeTimeout = 30 * time.Second

// bootSlack lets a boot probe report its own timeout before the check's.
const bootSlack = 5 * time.Second

// Checks returns the host's checks, each kind's own after them (in the
// order given), then those of the guest image, in the order doctor prints
// them.
func Checks(o Options, kinds ...Contributor) []Check {
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.KVMTimeout == 0 {
		o.KVMTimeout = 10 * time.Second
	}
	if o.TCGTimeout == 0 {
		o.TCGTimeout = 60 * time.Second
	}
	checks := []Check{
		{Name: "root", Run: func(context.Context) Result { return checkRoot(os.Geteuid()) }},
		{Name: "cgroups", Run: func(context.Context) Result { return checkCgroups(o.SysRoot) }},
		{Name: "overlayfs", Run: func(context.Context) Result { return checkOverlay("/proc") }},
		{Name: "network namespaces", Run: checkNetns},
		{Name: "BPF", Run: checkBPF},
		{Name: "XDP native on veth", Run: checkXDPNative},
		{Name: "Open vSwitch", Run: func(ctx context.Context) Result { return checkOVS(ctx, netpath.ProbeOVSDatapath) }},
		{Name: "passt", Run: toolCheck("passt", "runs the user data path")},
		{Name: "IOMMU and vfio", Run: func(context.Context) Result { return checkPassthrough("/") }},
		{Name: "image builder", Run: toolCheck("mmdebstrap", "builds the guest image")},
		{Name: "C compiler amd64", Run: toolCheck("x86_64-linux-gnu-gcc", "builds vfleet's own programs (stream, ctxswitch-pinned) into amd64 images")},
		{Name: "C compiler arm64", Run: toolCheck("aarch64-linux-gnu-gcc", "builds vfleet's own programs (stream, ctxswitch-pinned) into arm64 images")},
	}
	for _, k := range kinds {
		checks = append(checks, k.DoctorChecks(o)...)
	}
	return append(checks,
		Check{Name: "KSM", Run: func(context.Context) Result {
			return checkKSM(ksm.Host{Dir: filepath.Join(o.SysRoot, "kernel/mm/ksm")})
		}},
		Check{Name: "latency tracers", Run: func(context.Context) Result {
			release, tracers := hostinfo.HostTracers(hostinfo.Options{SysRoot: o.SysRoot})
			return checkTracers(release, tracers, vmKernelTracers(o.KernelPath))
		}},
		Check{Name: "measuring tools", Run: func(context.Context) Result { return checkImageTools(o.ImagePackages) }},
	)
}

// checkOVS finds the programs the ovs data path runs and says which
// datapath its bridge would switch on. The userspace one works anywhere,
// but it is not the switch most Open vSwitch hosts run.
func checkOVS(ctx context.Context, probe func() netpath.OVSDatapath) Result {
	var names, each []string
	var version string
	versions := map[string]bool{}
	for _, name := range netpath.OVSPrograms() {
		_, v, missing := findTool(ctx, name)
		if missing != nil {
			missing.Detail += " (runs the ovs data path)"
			return *missing
		}
		names, each = append(names, name), append(each, name+" "+v)
		versions[v], version = true, v
	}
	programs := "Open vSwitch: " + strings.Join(each, ", ")
	if len(versions) == 1 {
		programs = fmt.Sprintf("Open vSwitch %s (%s)", version, strings.Join(names, ", "))
	}
	dp := probe()
	detail := programs + "; the ovs path's bridge would use datapath " + dp.String()
	if dp.Type != "system" {
		return Result{Status: Warn, Detail: detail,
			Fix: "to measure the kernel's Open vSwitch datapath rather than the userspace one, run a kernel with the openvswitch module (CONFIG_OPENVSWITCH)"}
	}
	return Result{Status: OK, Detail: detail}
}

// checkVhostNet opens the vhost-net device as a VM's NIC would. Without it
// a VM on KVM still has its network, served by QEMU's own thread: slower,
// and not what most users' hosts measure.
func checkVhostNet(device string) Result {
	if device == "" {
		return Result{Status: Skip, Detail: "not checked"}
	}
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		what := err.Error()
		if errors.Is(err, os.ErrNotExist) {
			what = device + " is absent"
		}
		return Result{Status: Warn, Detail: what + "; VMs' NICs are served by QEMU's own thread",
			Fix: "load the vhost_net module (modprobe vhost_net) where the kernel has it; vfleet uses it under KVM, and records per VM whether it did"}
	}
	f.Close()
	return Result{Status: OK, Detail: device + " opens: VMs' NICs under KVM use the in-kernel vhost-net"}
}

// checkPassthrough says whether the passthrough path can lend this host's
// devices (below root) to VMs at all: an IOMMU, vfio-pci and its device.
// Which devices it can lend only a scenario says.
func checkPassthrough(root string) Result {
	if err := netpath.CheckPassthroughHost(root); err != nil {
		return Result{Status: Missing, Detail: err.Error(),
			Fix: "only the passthrough data path needs them: an IOMMU turned on in the firmware and the kernel, and the vfio-pci module"}
	}
	groups, _ := os.ReadDir(filepath.Join(root, "sys/kernel/iommu_groups"))
	return Result{Status: OK, Detail: fmt.Sprintf("an IOMMU (%d groups), vfio-pci and /dev/vfio/vfio: the passthrough path can lend PCI devices to VMs", len(groups))}
}

// checkKSM says whether VM groups can merge memory (memory_merge), and
// whether KSM runs already: then it merges for the host's own reasons and
// only unmarked RAM keeps a comparison clean.
func checkKSM(h ksm.Host) Result {
	if err := h.Available(); err != nil {
		return Result{Status: Warn, Detail: err.Error() + "; memory_merge is refused",
			Fix: "run a kernel built with CONFIG_KSM to measure what merging VM memory saves"}
	}
	run, err := os.ReadFile(filepath.Join(h.Dir, "run"))
	if err != nil {
		return Result{Status: Skip, Detail: err.Error()}
	}
	if strings.TrimSpace(string(run)) == "1" {
		return Result{Status: OK, Detail: "KSM is on already (run=1); VM RAM without memory_merge is marked unmergeable"}
	}
	return Result{Status: OK, Detail: "KSM is available and off; memory_merge switches it on for a run"}
}

func checkRoot(euid int) Result {
	if euid == 0 {
		return Result{Status: OK, Detail: "running as root"}
	}
	return Result{Status: Fail, Detail: fmt.Sprintf("running as uid %d: guests need namespaces, mounts and cgroups", euid),
		Fix: "run vfleet as root (sudo)"}
}

// wantedControllers are the cgroup controllers guests are confined with:
// CPU shares and quotas, CPU pinning, memory limits.
var wantedControllers = []string{"cpu", "cpuset", "memory"}

func checkCgroups(sysRoot string) Result {
	mode, err := hostinfo.CgroupMode(sysRoot)
	if err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	have, err := cgroupControllers(sysRoot, mode)
	if err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	var missing []string
	for _, c := range wantedControllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	detail := describeCgroupMode(mode)
	if len(missing) > 0 {
		return Result{Status: Warn, Detail: detail + "; controllers missing: " + strings.Join(missing, ", "),
			Fix: "enable the " + strings.Join(missing, ", ") + " controllers: guests cannot be pinned or limited without them"}
	}
	return Result{Status: OK, Detail: detail + "; controllers cpu, cpuset, memory"}
}

func describeCgroupMode(mode string) string {
	switch mode {
	case hostinfo.CgroupV2:
		return "v2 (unified hierarchy)"
	case hostinfo.CgroupHybrid:
		return "hybrid (v1 controllers plus a v2 hierarchy at unified/)"
	default:
		return "v1"
	}
}

// cgroupControllers lists the controllers the hierarchy that guests are
// confined in offers: the v2 root's cgroup.controllers, or, in v1 and
// hybrid mode, the controllers mounted as v1 hierarchies.
func cgroupControllers(sysRoot, mode string) (map[string]bool, error) {
	root := filepath.Join(sysRoot, "fs", "cgroup")
	have := map[string]bool{}
	if mode == hostinfo.CgroupV2 {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("cgroup controllers: %w", err)
		}
		for _, c := range strings.Fields(string(b)) {
			have[c] = true
		}
		return have, nil
	}
	for _, c := range wantedControllers {
		if st, err := os.Stat(filepath.Join(root, c)); err == nil && st.IsDir() {
			have[c] = true
		}
	}
	return have, nil
}

// checkOverlay looks for overlayfs among the file systems the kernel
// under procRoot offers.
func checkOverlay(procRoot string) Result {
	fss, err := procfs.Filesystems(procRoot)
	if err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	if fss["overlay"] {
		return Result{Status: OK, Detail: "available (copy-on-write guest root filesystems)"}
	}
	return Result{Status: Missing, Detail: "the kernel lists no overlay filesystem",
		Fix: "modprobe overlay (module shipped with the Debian linux-image package)"}
}

// installFix is the command or step that provides a known tool.
func installFix(name string) string {
	s, err := tools.Lookup(name)
	if err != nil {
		return ""
	}
	if s.Package != "" {
		return "apt-get install " + s.Package
	}
	return s.Install
}

// findTool finds a tool and its version; a Result is returned when the
// tool is missing.
func findTool(ctx context.Context, name string) (tools.Tool, string, *Result) {
	t, err := tools.Find(name)
	if errors.Is(err, tools.ErrMissing) {
		// The install step goes to Fix, not repeated in Detail.
		return t, "", &Result{Status: Missing, Detail: name + " not found in PATH", Fix: installFix(name)}
	}
	if err != nil {
		return t, "", &Result{Status: Fail, Detail: err.Error()}
	}
	v, err := tools.Version(ctx, t)
	if err != nil {
		v = "(version unknown: " + err.Error() + ")"
	}
	return t, v, nil
}

func toolCheck(name, purpose string) func(context.Context) Result {
	return func(ctx context.Context) Result {
		t, v, missing := findTool(ctx, name)
		if missing != nil {
			missing.Detail += " (" + purpose + ")"
			return *missing
		}
		return Result{Status: OK, Detail: fmt.Sprintf("%s %s at %s", name, v, t.Path)}
	}
}

// runtimeCheck finds the runtime and has probe start a container with it.
// cgroupMode is asked only on failure, to explain the layout most often
// behind one: several runtimes refuse the hybrid layout that runc accepts.
func runtimeCheck(rt string, probe func(context.Context, string) error, cgroupMode func() string) func(context.Context) Result {
	return func(ctx context.Context) Result {
		_, v, missing := findTool(ctx, rt)
		if missing != nil {
			return *missing
		}
		if probe == nil {
			return Result{Status: Skip, Detail: fmt.Sprintf("%s %s found; starting a container not probed", rt, v)}
		}
		err := probe(ctx, rt)
		if err == nil {
			return Result{Status: OK, Detail: fmt.Sprintf("%s %s starts a container", rt, v)}
		}
		r := Result{Status: Fail, Detail: fmt.Sprintf("%s %s does not start a container: %v", rt, v, err)}
		if cgroupMode() == hostinfo.CgroupHybrid {
			r.Fix = "cgroups here are hybrid, which " + rt + " may reject: use runc on this host, " +
				"or boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2"
		}
		return r
	}
}

// checkImageTools looks in the guest image's packages for every program
// a workload runs that Debian ships.
func checkImageTools(packages map[string]string) Result {
	if packages == nil {
		return Result{Status: Missing, Detail: "no guest image yet, so no measuring tools in it", Fix: "vfleet image build"}
	}
	var have, missing []string
	for _, p := range programs.Debian() {
		if v, ok := packages[p.Package]; ok {
			have = append(have, p.Name+" "+v)
		} else {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", p.Name, p.Package))
		}
	}
	if len(missing) > 0 {
		return Result{Status: Missing, Detail: "the guest image lacks " + strings.Join(missing, ", "), Fix: "vfleet image build --rebuild"}
	}
	return Result{Status: OK, Detail: "in the guest image: " + strings.Join(have, ", ")}
}

// checkForeignImages says whether vfleet's image can be built for the
// other architectures VM guests may have: their packages' scripts run
// under qemu-user, through binfmt_misc.
func checkForeignImages(ctx context.Context, arches []string, canRun func(context.Context, string) error) Result {
	if canRun == nil || len(arches) == 0 {
		return Result{Status: Skip, Detail: "no other architecture to check"}
	}
	var cannot []string
	for _, arch := range arches {
		if err := canRun(ctx, arch); err != nil {
			cannot = append(cannot, err.Error())
		}
	}
	if len(cannot) > 0 {
		return Result{Status: Missing, Detail: strings.Join(cannot, "; ")}
	}
	return Result{Status: OK, Detail: "this host runs " + strings.Join(arches, ", ") + " programs under emulation: vfleet's image builds for them (arch: on VM groups)"}
}
