package qemu

import "libvirt.org/go/libvirtxml"

// libvirtFirmware boots a domain through UEFI as the direct VM's argv
// does: Debian's firmware code read-only and the guest's own copy of the
// variable store as pflash, the root disk first, and the cloud-init seed
// that brings the agent as a read-only virtio disk. It leaves a domain
// that boots a kernel as it is.
func libvirtFirmware(d *libvirtxml.Domain, c launchConfig) {
	if c.Firmware == nil {
		return
	}
	d.OS.Loader = &libvirtxml.DomainLoader{Path: c.Firmware.Code, Readonly: "yes", Type: "pflash"}
	d.OS.NVRam = &libvirtxml.DomainNVRam{NVRam: c.Firmware.Vars}
	d.Devices.Disks[0].Boot = &libvirtxml.DomainDeviceBoot{Order: 1}
	if c.Seed != "" {
		d.Devices.Disks = append(d.Devices.Disks, libvirtxml.DomainDisk{
			Device:   "disk",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: formatRaw},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: c.Seed}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "vdb", Bus: "virtio"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
	}
}
