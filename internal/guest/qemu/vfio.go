package qemu

import (
	"errors"

	"github.com/vfleet/vfleet/internal/guest"
)

// checkPassthrough refuses what a VM given a PCI device of the host (the
// passthrough path, QEMU's vfio-pci) cannot be.
func checkPassthrough(spec guest.Spec, machine, security string) error {
	switch {
	case machine == MachineMicroVM:
		return errors.New("network passthrough: runtime microvm has no PCI bus to put the lent device on: use runtime q35")
	case spec.Launch == LaunchClone:
		return errors.New("network passthrough: a clone resumes its template's saved devices, and a lent PCI device's state is not saved: use launch boot")
	case security == guest.SecuritySandbox:
		return errors.New("network passthrough: security sandbox runs QEMU as an unprivileged user, which can neither open the device's " +
			"vfio group nor lock the VM's memory for the device's DMA: remove security")
	}
	return nil
}
