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
//
// Start works out once what every way of starting shares (launch.go: the
// boot files, the accelerator, the guest's directory, QEMU's launch
// config, a user's disk or libvirt domain in place of vfleet's image) and
// hands it to the launcher of the guest's way, which stages the disk and
// the card, starts QEMU, waits for the agent and finishes the start, each
// step's undo on the guest's teardown: vfleet's own QEMU booting the
// guest (launch_direct.go: a card QEMU inherits open, the sandbox, vCPU
// pinning), or resuming a template (launch_clone.go), or this host's
// libvirt (launch_libvirt.go: a tap opened by name in the host's own
// namespace) or another host's (launch_remote.go: the files uploaded
// there).
package qemu
