package qemu

import (
	"slices"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
)

// DoctorChecks: QEMU of each architecture, whether vfleet's image builds
// for the foreign ones, the disk tool, whether each accelerator really
// boots the image's kernel, vhost-net, and libvirt for libvirt-managed VMs.
func (kind) DoctorChecks(o doctor.Options) []doctor.Check {
	foreign := slices.DeleteFunc(slices.Clone(guest.Arches), func(a string) bool { return a == image.HostArch })
	checks := []doctor.Check{
		doctor.ToolCheck("QEMU", "qemu-system-x86_64", "runs VM guests"),
		doctor.ToolCheck("QEMU arm64", "qemu-system-aarch64", "emulates arm64 VM guests (arch: arm64)"),
		doctor.ForeignImagesCheck(foreign, image.CheckCanRun),
		doctor.ToolCheck("qemu-img", "qemu-img", "makes copy-on-write VM disks"),
	}
	checks = append(checks, doctor.AccelChecks(o)...)
	return append(checks, doctor.VhostNetCheck(VhostNetDevice), libvirtCheck())
}
