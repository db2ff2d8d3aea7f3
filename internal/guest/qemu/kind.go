package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/tools"
)

// KindName is the name scenarios use.
const KindName = "vm"

// Disk modes: a qcow2 overlay on the shared base disk, a full private
// qcow2 copy, or a private raw image.
const (
	DiskOverlay = "overlay"
	DiskCopy    = "copy"
	DiskRaw     = "raw"
)

// Disk image formats, as QEMU names them.
const (
	formatQCOW2 = "qcow2"
	formatRaw   = "raw"
)

// Launch modes.
const (
	LaunchBoot  = "boot"
	LaunchClone = "clone"
)

// DefaultMemory is a VM's RAM when the spec gives none.
const DefaultMemory = 512 << 20

func init() { guest.Register(kind{}) }

type kind struct{}

func (kind) Name() string { return KindName }

// Traits: a VM's NIC is a tap, its one virtio-serial port serves one agent
// client, its vCPU threads are what gets pinned, its agent lives in the
// guest's RAM, under a kernel of its own booted from a disk.
func (kind) Traits() guest.Traits {
	return guest.Traits{Network: guest.NetTap, PinsVCPUs: true, AgentInGuest: true, OwnKernel: true, BootsDisk: true, Security: vmSecurity}
}

// Program: the QEMU of the guest's architecture, whose releases change
// devices, machines and TCG.
func (kind) Program(spec guest.Spec) string {
	if _, a, err := archOf(spec.Arch); err == nil {
		return a.qemu
	}
	return ""
}

// ConformanceSpec: the suite's VMs are emulated (TCG), which works on
// every host; whether KVM does is TestAccelKVM's question.
func (kind) ConformanceSpec() guest.Spec { return guest.Spec{Accel: AccelTCG} }

// Probe checks that the tools every VM guest needs are installed; the
// QEMU of a guest's architecture is looked for by New. Whether KVM works
// is found by booting a kernel: before the run for a guest that asks for
// it (ProbeSpec), else at start for one that may fall back to TCG.
func (kind) Probe(_ context.Context, runtime string) error {
	if runtime != "" && !slices.Contains(allMachines(), runtime) {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, unknownRuntime(runtime))
	}
	if _, err := tools.Find("qemu-img"); err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("%w: mkfs.ext4 not found in PATH: %s", guest.ErrNotSupported, tools.DebianInstall("e2fsprogs"))
	}
	return nil
}

// New checks the spec; it touches nothing on the host.
func (kind) New(spec guest.Spec, env guest.Env) (guest.Guest, error) {
	bad := func(format string, args ...any) (guest.Guest, error) {
		return nil, fmt.Errorf("guest %s: "+format, append([]any{spec.Name}, args...)...)
	}
	if err := guest.CheckSpec(KindName, spec); err != nil {
		return bad("%v", err)
	}
	arch, archSpec, err := archOf(spec.Arch)
	if err != nil {
		return bad("%v", err)
	}
	machine, err := machineOf(spec.Runtime, archSpec)
	if err != nil {
		return bad("%v", err)
	}
	qemuTool, err := tools.Find(archSpec.qemu)
	if err != nil {
		return bad("%v", err)
	}
	if spec.Firmware == guest.FirmwareUEFI {
		if err := archSpec.uefi.check(machine); err != nil {
			return bad("%v", err)
		}
	}
	if emulated(arch) && spec.Launch == LaunchClone {
		return bad("launch: clone is for guests of the host's arch (%s); an emulated %s guest boots (launch: boot)", image.HostArch, arch)
	}
	if emulated(arch) && spec.Accel == AccelKVM {
		return bad("accel kvm: a %s guest on this %s host can only be emulated: use accel tcg or auto", arch, image.HostArch)
	}
	if spec.CPUs != "" || spec.CPULimit != 0 {
		return bad("cpus and cpu_limit do not apply to kind vm: give vcpus, and pin_vcpus to bind them to host CPUs")
	}
	if err := checkUserBoot(spec); err != nil {
		return bad("%v", err)
	}
	security, err := guest.SecurityOf(spec)
	if err != nil {
		return bad("%v", err)
	}
	if security == guest.SecuritySandbox {
		if err := checkSandbox(spec); err != nil {
			return bad("%v", err)
		}
	}
	if spec.Libvirt != "" {
		if err := checkLibvirt(spec, env, machine, arch, security); err != nil {
			return bad("%v", err)
		}
	}
	var nic *vminit.NetConfig
	if t := spec.Tap; t != nil {
		switch {
		case t.Root && spec.Libvirt == "":
			return bad("a tap in this host's own namespace is for a VM libvirt runs; vfleet's QEMU takes its tap from the run's host side")
		case t.Name == "" || t.NSPath == "" && !t.Root:
			return bad("tap needs the namespace holding it and its name (got %q in %q)", t.Name, t.NSPath)
		}
		mac, err := net.ParseMAC(t.MAC)
		if err != nil {
			return bad("tap %s: %v", t.Name, err)
		}
		nic = &vminit.NetConfig{Addr: t.Addr, Gateway: t.Gateway, MAC: mac}
		if err := nic.Check(); err != nil {
			return bad("tap %s: %v", t.Name, err)
		}
		if netpath.IsPCIAddress(t.Name) {
			if err := checkPassthrough(spec, machine, security); err != nil {
				return bad("%v", err)
			}
		}
	}
	vcpus := max(spec.VCPUs, 1)
	var pins []int
	if spec.PinVCPUs != "" {
		if pins, err = pinPlan(spec.PinVCPUs, vcpus); err != nil {
			return bad("%v", err)
		}
	}
	mem := spec.MemoryBytes
	if mem == 0 {
		mem = DefaultMemory
	}
	if mem < 64<<20 {
		return bad("memory %d bytes is too little for a VM: give at least 64MiB", mem)
	}
	dir := filepath.Join(env.StateDir, spec.Name)
	// A unix socket's path is at most 107 bytes; the guest's sockets live
	// in its state directory.
	if sock := filepath.Join(dir, "agent.sock"); env.StateDir != "" && len(sock) > 107 {
		return bad("state directory %s is too deep for a unix socket path (%d bytes, at most 107)", dir, len(sock))
	}
	return &Guest{
		Base: guest.NewBase(spec), env: env, dir: dir,
		arch: arch, archSpec: archSpec, qemu: qemuTool, machine: machine, vcpus: vcpus, memMiB: mem >> 20, pins: pins,
		disk: strings.TrimSpace(spec.Own.Text(fieldDisk)), clone: spec.Launch == LaunchClone, memoryMerge: spec.MemoryMerge, nic: nic,
		sandbox: security == guest.SecuritySandbox, libvirt: spec.Libvirt,
	}, nil
}

// checkUserBoot checks how a VM boots the user's disk, if it has one.
func checkUserBoot(spec guest.Spec) error {
	b := spec.Boot
	switch {
	case spec.Image == "" && (!b.IsZero() || spec.Firmware != ""):
		return errors.New("kernel, initrd, cmdline and firmware boot a user's disk: give image (a qcow2 or raw disk) too, or remove them to boot vfleet's own image")
	case spec.Image == "":
		return nil
	case spec.KernelFlavour != "":
		return errors.New("kernel_flavour picks which of vfleet's kernels its own image boots: a user's disk boots its own kernel (kernel:, or firmware: uefi)")
	case spec.Launch == LaunchClone:
		return errors.New("launch: clone is for vfleet's own image: a user's disk boots each guest (launch: boot)")
	}
	if domain, ok := spec.LibvirtDomain(); ok {
		switch {
		case spec.Libvirt == "":
			return fmt.Errorf("image %s%s needs libvirt: URI on the group, where the domain is defined", guest.LibvirtImagePrefix, domain)
		case !b.IsZero() || spec.Firmware != "":
			return fmt.Errorf("image %s%s boots as the domain does, with its kernel, initrd and cmdline or its firmware: remove kernel, initrd, cmdline and firmware", guest.LibvirtImagePrefix, domain)
		}
		return nil
	}
	switch {
	case spec.Firmware == guest.FirmwareUEFI && !b.IsZero():
		return errors.New("firmware: uefi boots the disk's own boot loader, which picks the kernel: remove kernel, initrd and cmdline, or remove firmware to boot that kernel directly")
	case spec.Firmware == guest.FirmwareUEFI:
		return nil
	case b.Kernel == "":
		return errors.New("a user's disk boots either with the user's kernel (kernel:, and initrd and cmdline as the disk needs them) or through its own boot loader (firmware: uefi)")
	}
	return checkUserCmdline(b.Cmdline)
}
