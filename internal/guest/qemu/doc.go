// Package qemu implements the "vm" guest kind: the guest image booted as a
// virtual machine by QEMU, on the q35 machine (virtio over PCI) or the
// microvm machine (virtio over MMIO, no PCI), accelerated by KVM or
// emulated by TCG. The agent is the VM's init (see package vminit) and
// serves on a virtio-serial port whose host end is a unix socket; QEMU is
// driven over QMP on a second socket.
//
// Lifecycle: Start makes the image's shared base disk and initramfs once
// (package image), picks the accelerator (KVM only when a kernel really
// boots under it, a probe done once per process), records and creates the
// guest's state directory with its own copy-on-write disk, starts QEMU and
// records its process, then waits for the agent within a bound (a guest
// that panics fails at once, quoting the panic from the serial console).
// vCPU threads are then pinned and prioritised as the spec asks. Stop asks
// the guest to power off (ACPI power button), then QEMU to quit, then
// kills it, and removes the state directory; it is idempotent and bounded
// in time. Everything a killed vfleet leaves is found through the ledger.
package qemu
