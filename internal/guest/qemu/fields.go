package qemu

import "github.com/vfleet/vfleet/internal/guest"

// MaxVCPUs bounds a VM's vcpus, as QEMU's q35 machine does.
const MaxVCPUs = 288

// fieldDisk is how a VM's disk is made, held in the spec's own values:
// "overlay" (or empty): a copy-on-write layer over the image's shared
// base disk; "copy": a full private qcow2 copy of it; or "raw": a private
// raw image of it.
const fieldDisk = "disk"

// Fields are what a scenario may say of a VM beyond what every group
// says; for a VM, runtime names the machine and memory is its RAM.
func (kind) Fields() []guest.Field {
	return []guest.Field{
		guest.TextField("arch", func(s *guest.Spec) *string { return &s.Arch }, guest.Arches...),
		guest.TextField("kernel_flavour", func(s *guest.Spec) *string { return &s.KernelFlavour }, guest.KernelFlavours...),
		guest.IntField("vcpus", func(s *guest.Spec) *int { return &s.VCPUs }, 1, MaxVCPUs),
		guest.TextField("accel", func(s *guest.Spec) *string { return &s.Accel }, AccelAuto, AccelKVM, AccelTCG),
		guest.OwnTextField(fieldDisk, DiskOverlay, DiskCopy, DiskRaw),
		guest.TextField("launch", func(s *guest.Spec) *string { return &s.Launch }, LaunchBoot, LaunchClone),
		guest.BoolField("memory_merge", func(s *guest.Spec) *bool { return &s.MemoryMerge }),
		guest.CPUListField("pin_vcpus", func(s *guest.Spec) *string { return &s.PinVCPUs }),
		guest.IntField("rt_priority", func(s *guest.Spec) *int { return &s.RTPriority }, 1, 99),
		guest.FileField("kernel", func(s *guest.Spec) *string { return &s.Boot.Kernel }, guest.MaxKernelBytes,
			"the kernel image a VM boots its disk with"),
		guest.FileField("initrd", func(s *guest.Spec) *string { return &s.Boot.Initrd }, guest.MaxInitrdBytes,
			"the kernel's initrd, or remove initrd to boot without one"),
		guest.TextField("cmdline", func(s *guest.Spec) *string { return &s.Boot.Cmdline }),
		guest.TextField("firmware", func(s *guest.Spec) *string { return &s.Firmware }, guest.FirmwareUEFI),
		guest.Spreading(guest.CheckedTextField("libvirt", func(s *guest.Spec) *string { return &s.Libvirt }, checkLibvirtURI)),
	}
}
