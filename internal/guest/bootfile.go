package guest

// Bounds on the files a VM is given whole: QEMU loads a kernel and an
// initrd into guest memory and maps UEFI firmware, and vfleet copies an
// initrd and the firmware's variables into the guest's directory. A mistake (a directory, /dev/zero,
// the disk given as the initrd) is refused by name instead of filling the
// disk or blocking the start. A disk is never read whole, but a path to a
// device or a directory is no disk either.
const (
	MaxKernelBytes   = 256 << 20
	MaxInitrdBytes   = 2 << 30
	MaxFirmwareBytes = 64 << 20
	MaxDiskBytes     = 1 << 40
)
