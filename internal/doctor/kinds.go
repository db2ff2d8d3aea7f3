package doctor

import (
	"context"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

// Contributor is implemented by a guest kind that brings checks of its
// own: what its guests need of the host (a runtime that really starts a
// container, QEMU and an accelerator that really boots a kernel).
type Contributor interface {
	// DoctorChecks are the kind's checks; o has its defaults filled in.
	DoctorChecks(o Options) []Check
}

// ToolCheck finds a host program and its version; purpose says what it
// is for when it is missing.
func ToolCheck(title, name, purpose string) Check {
	return Check{Name: title, Run: toolCheck(name, purpose)}
}

// RuntimeCheck finds a container runtime and has probe start a container
// with it; its error should carry the runtime's own message.
func RuntimeCheck(o Options, rt string, probe func(ctx context.Context, runtime string) error) Check {
	return Check{Name: "runtime " + rt, Timeout: runtimeProbeTimeout,
		Run: runtimeCheck(rt, probe, func() string { mode, _ := hostinfo.CgroupMode(o.SysRoot); return mode })}
}

// AccelChecks boot the guest image's kernel under KVM and under TCG, each
// bounded by its own timeout: /dev/kvm can exist and still not work.
func AccelChecks(o Options) []Check {
	return []Check{
		{Name: "KVM", Timeout: o.KVMTimeout + bootSlack, Run: func(ctx context.Context) Result {
			return checkAccel(ctx, accelProbe{accel: "kvm", kernel: o.KernelPath, timeout: o.KVMTimeout, kvmDevice: "/dev/kvm"})
		}},
		{Name: "TCG", Timeout: o.TCGTimeout + bootSlack, Run: func(ctx context.Context) Result {
			return checkAccel(ctx, accelProbe{accel: "tcg", kernel: o.KernelPath, timeout: o.TCGTimeout})
		}},
	}
}

// VhostNetCheck opens the vhost-net device VMs' NICs use under KVM.
func VhostNetCheck(device string) Check {
	return Check{Name: "vhost-net", Run: func(context.Context) Result { return checkVhostNet(device) }}
}

// ForeignImagesCheck says whether vfleet's image builds for the other
// architectures guests may have; canRun says whether the host runs one's
// programs.
func ForeignImagesCheck(arches []string, canRun func(ctx context.Context, arch string) error) Check {
	return Check{Name: "foreign images", Run: func(ctx context.Context) Result { return checkForeignImages(ctx, arches, canRun) }}
}
