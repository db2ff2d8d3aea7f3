// Package vminit is the inside of a VM guest's boot: the code the agent
// binary runs as the guest's first process. It is linked into
// cmd/vfleet-agent, so the one static binary vfleet already installs in
// the image is also the VM's init, and no second program has to be built,
// shipped and kept in step.
//
// Lifecycle: the kernel starts the initramfs's /init (the agent binary)
// with --pid1. Stage1 loads the virtio modules the cloud kernel ships as
// modules, mounts the root disk and switches to it, then executes the agent
// again from the real root, where RunPID1 mounts the pseudo filesystems,
// sets the hostname, starts the serving agent on the virtio-serial port as
// its child, reaps orphans and, on SIGTERM or a press of the ACPI power
// button, stops everything and powers the machine off.
package vminit
