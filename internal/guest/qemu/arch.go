package qemu

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/regfile"
)

// MachineVirt is arm64's machine: virtio over PCIe, a PL011 serial port
// and a device tree the kernel boots with.
const MachineVirt = "virt"

// archSpec is what QEMU needs to know of a guest architecture.
type archSpec struct {
	qemu string // QEMU's program for it, found through internal/tools
	// machines are the scenario's runtimes for it, the default first.
	machines []string
	// console is the kernel's name of the serial port -serial drives.
	console string
	// tcgCPU is the CPU model emulated under TCG. arm64's "max" has
	// pointer authentication, whose emulation makes it many times
	// slower under TCG than a plain ARMv8.0 core.
	tcgCPU string
	// uefi is the UEFI firmware a user's disk boots through.
	uefi uefiFirmware
}

// uefiFirmware is an architecture's UEFI firmware as Debian ships it: the
// code, read-only, and the variable store each guest gets a copy of.
type uefiFirmware struct {
	code, vars, pkg string
	// machines are those it runs on.
	machines []string
}

var archSpecs = map[string]archSpec{
	"amd64": {qemu: "qemu-system-x86_64", machines: []string{MachineQ35, MachineMicroVM}, console: "ttyS0", tcgCPU: "max",
		uefi: uefiFirmware{code: "/usr/share/OVMF/OVMF_CODE_4M.fd", vars: "/usr/share/OVMF/OVMF_VARS_4M.fd", pkg: "ovmf", machines: []string{MachineQ35}}},
	"arm64": {qemu: "qemu-system-aarch64", machines: []string{MachineVirt}, console: "ttyAMA0", tcgCPU: "cortex-a72",
		uefi: uefiFirmware{code: "/usr/share/AAVMF/AAVMF_CODE.fd", vars: "/usr/share/AAVMF/AAVMF_VARS.fd", pkg: "qemu-efi-aarch64", machines: []string{MachineVirt}}},
}

// check says whether the firmware is installed and runs on machine.
func (f uefiFirmware) check(machine string) error {
	if !slices.Contains(f.machines, machine) {
		return fmt.Errorf("firmware: uefi needs runtime %s (%s has no UEFI firmware)", strings.Join(f.machines, " or "), machine)
	}
	for _, p := range []string{f.code, f.vars} {
		err := regfile.Check(p, guest.MaxFirmwareBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("firmware: uefi: %s not found: install the Debian package %s", p, f.pkg)
		}
		if err != nil {
			return fmt.Errorf("firmware: uefi: %w (reinstall the Debian package %s)", err, f.pkg)
		}
	}
	return nil
}

// archOf is a spec's guest architecture: its arch, or the host's.
func archOf(arch string) (string, archSpec, error) {
	if arch == "" {
		arch = image.HostArch
	}
	a, ok := archSpecs[arch]
	if !ok {
		return "", archSpec{}, fmt.Errorf("unknown arch %q (known: %s)", arch, strings.Join(guest.Arches, ", "))
	}
	return arch, a, nil
}

// machineOf is the machine a runtime names for an architecture.
func machineOf(runtime string, a archSpec) (string, error) {
	switch {
	case runtime == "":
		return a.machines[0], nil
	case slices.Contains(a.machines, runtime):
		return runtime, nil
	case slices.Contains(allMachines(), runtime):
		return "", fmt.Errorf("VM runtime %q is not a machine of this arch (it has: %s)", runtime, strings.Join(a.machines, ", "))
	}
	return "", unknownRuntime(runtime)
}

// allMachines are the machines of every architecture, in the order of
// guest.Arches.
func allMachines() []string {
	var all []string
	for _, arch := range guest.Arches {
		all = append(all, archSpecs[arch].machines...)
	}
	return all
}

func unknownRuntime(runtime string) error {
	return fmt.Errorf("unknown VM runtime %q (known: %s)", runtime, strings.Join(allMachines(), ", "))
}

// emulated says that a guest of arch can only be emulated on this host.
func emulated(arch string) bool { return arch != image.HostArch }
