package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/tools"
)

// Options wire the checks to the rest of vfleet without importing it.
type Options struct {
	// Runtimes to check, with the probe that really starts a container.
	Runtimes     []string
	RuntimeProbe func(ctx context.Context, runtime string) error
	// KernelPath is the guest image's kernel, empty when there is no image.
	KernelPath string
	// ImagePackages are the guest image's package versions; nil when the
	// image is not built.
	ImagePackages map[string]string
	SysRoot       string // default /sys
	// KVMTimeout and TCGTimeout bound the boot probes.
	KVMTimeout, TCGTimeout time.Duration
}

// Checks returns the built-in checks.
func Checks(o Options) []Check {
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.KVMTimeout == 0 {
		o.KVMTimeout = 15 * time.Second
	}
	if o.TCGTimeout == 0 {
		o.TCGTimeout = 90 * time.Second
	}
	checks := []Check{
		{Name: "root", Run: checkRoot},
		{Name: "cgroups", Run: func(context.Context) Result { return checkCgroups(o.SysRoot) }},
		{Name: "overlayfs", Run: func(context.Context) Result { return checkOverlay() }},
		{Name: "network namespaces", Run: checkNetns},
		{Name: "BPF", Run: checkBPF},
		{Name: "image builder", Run: toolCheck("mmdebstrap", "builds the guest image")},
	}
	for _, rt := range o.Runtimes {
		checks = append(checks, Check{Name: "runtime " + rt, Timeout: 30 * time.Second, Run: runtimeCheck(rt, o.RuntimeProbe)})
	}
	checks = append(checks,
		Check{Name: "QEMU", Run: toolCheck("qemu-system-x86_64", "runs VM guests")},
		Check{Name: "qemu-img", Run: toolCheck("qemu-img", "makes copy-on-write VM disks")},
		Check{Name: "KVM", Timeout: o.KVMTimeout + 5*time.Second, Run: func(ctx context.Context) Result { return checkAccel(ctx, "kvm", o.KernelPath, o.KVMTimeout) }},
		Check{Name: "TCG", Timeout: o.TCGTimeout + 5*time.Second, Run: func(ctx context.Context) Result { return checkAccel(ctx, "tcg", o.KernelPath, o.TCGTimeout) }},
		Check{Name: "measuring tools", Run: func(context.Context) Result { return checkImageTools(o.ImagePackages) }},
	)
	return checks
}

func checkRoot(context.Context) Result {
	if os.Geteuid() == 0 {
		return Result{Status: OK, Detail: "running as root"}
	}
	return Result{Status: Fail, Detail: "not root: guests need namespaces, mounts and cgroups", Fix: "run vfleet with sudo"}
}

var wantedControllers = []string{"cpu", "cpuset", "memory"}

func checkCgroups(sysRoot string) Result {
	mode, err := hostinfo.CgroupMode(sysRoot)
	if err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	have := map[string]bool{}
	if mode == hostinfo.CgroupV2 {
		b, _ := os.ReadFile(sysRoot + "/fs/cgroup/cgroup.controllers")
		for _, c := range strings.Fields(string(b)) {
			have[c] = true
		}
	} else {
		for _, c := range wantedControllers {
			if _, err := os.Stat(sysRoot + "/fs/cgroup/" + c); err == nil {
				have[c] = true
			}
		}
	}
	var missing []string
	for _, c := range wantedControllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	detail := fmt.Sprintf("%s hierarchy", mode)
	if len(missing) > 0 {
		return Result{Status: Warn, Detail: detail + "; controllers missing: " + strings.Join(missing, ", "),
			Fix: "CPU sets and memory limits need these controllers enabled"}
	}
	return Result{Status: OK, Detail: detail + " with cpu, cpuset and memory controllers"}
}

func checkOverlay() Result {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(strings.TrimPrefix(line, "nodev")) == "overlay" {
			return Result{Status: OK, Detail: "available (copy-on-write guest layers)"}
		}
	}
	return Result{Status: Missing, Detail: "the kernel lists no overlay filesystem", Fix: "modprobe overlay"}
}

// checkNetns starts a process in a new network namespace.
func checkNetns(ctx context.Context) Result {
	cmd := exec.CommandContext(ctx, "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Run(); err != nil {
		return Result{Status: Fail, Detail: "cannot create a network namespace: " + err.Error()}
	}
	return Result{Status: OK, Detail: "a process started in a new network namespace"}
}

// checkBPF asks the kernel to load minimal programs of the types the data
// paths use.
func checkBPF(context.Context) Result {
	var ok, bad []string
	for _, pt := range []ebpf.ProgramType{ebpf.XDP, ebpf.SchedCLS} {
		if err := features.HaveProgramType(pt); err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", pt, err))
		} else {
			ok = append(ok, pt.String())
		}
	}
	if len(bad) > 0 {
		return Result{Status: Fail, Detail: "cannot load " + strings.Join(bad, "; "), Fix: "eBPF data paths need a kernel with BPF enabled and root"}
	}
	return Result{Status: OK, Detail: "loads " + strings.Join(ok, " and ") + " programs"}
}

func toolCheck(name, purpose string) func(context.Context) Result {
	return func(ctx context.Context) Result {
		t, err := tools.Find(name)
		if err != nil {
			return Result{Status: Missing, Detail: name + " not found (" + purpose + ")", Fix: installHint(name)}
		}
		v, err := tools.Version(ctx, t)
		if err != nil {
			return Result{Status: Warn, Detail: fmt.Sprintf("%s at %s, version unknown: %v", name, t.Path, err)}
		}
		return Result{Status: OK, Detail: fmt.Sprintf("%s %s (%s)", name, v, t.Path)}
	}
}

func installHint(name string) string {
	s, err := tools.Lookup(name)
	if err != nil {
		return ""
	}
	if s.Package != "" {
		return "apt-get install " + s.Package
	}
	return s.Install
}

func runtimeCheck(rt string, probe func(context.Context, string) error) func(context.Context) Result {
	return func(ctx context.Context) Result {
		t, err := tools.Find(rt)
		if err != nil {
			return Result{Status: Missing, Detail: rt + " not installed", Fix: installHint(rt)}
		}
		v, _ := tools.Version(ctx, t)
		if probe == nil {
			return Result{Status: Skip, Detail: fmt.Sprintf("%s %s found; start not probed", rt, v)}
		}
		if err := probe(ctx, rt); err != nil {
			return Result{Status: Fail, Detail: fmt.Sprintf("%s %s: %v", rt, v, err)}
		}
		return Result{Status: OK, Detail: fmt.Sprintf("%s %s starts containers", rt, v)}
	}
}

// imageTools maps each measuring tool to the image package that ships it.
var imageTools = map[string]string{"stress-ng": "stress-ng", "sysbench": "sysbench", "fio": "fio", "iperf3": "iperf3", "sockperf": "sockperf", "cyclictest": "rt-tests"}

func checkImageTools(packages map[string]string) Result {
	if packages == nil {
		return Result{Status: Missing, Detail: "no guest image yet, so no measuring tools", Fix: "vfleet image build"}
	}
	names := make([]string, 0, len(imageTools))
	for n := range imageTools {
		names = append(names, n)
	}
	sort.Strings(names)
	var have, missing []string
	for _, n := range names {
		if v, ok := packages[imageTools[n]]; ok {
			have = append(have, n+" "+v)
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return Result{Status: Missing, Detail: "image lacks " + strings.Join(missing, ", "), Fix: "vfleet image build --rebuild"}
	}
	return Result{Status: OK, Detail: "in the guest image: " + strings.Join(have, ", ")}
}

// errNoKernel says there is nothing to boot.
var errNoKernel = errors.New("no guest kernel")
