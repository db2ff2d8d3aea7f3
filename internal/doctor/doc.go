// Package doctor answers "what can this host do, and what is missing?".
//
// It owns the built-in host checks (root, cgroups, overlayfs, network
// namespaces, BPF and native XDP, Open vSwitch, OCI runtimes, QEMU, KVM
// and TCG, the guest image's measuring tools: those the registered
// workloads declare), running them concurrently each under its own time
// limit, and the plain-text rendering of their results. Every result that
// is not OK says what to install or do.
//
// Checks probe rather than trust: a runtime must really start a container
// and an accelerator must really boot a kernel, because a binary or a
// /dev/kvm node can exist and still not work. Whatever a probe creates (a
// network namespace, a veth pair, a BPF program, a QEMU process) is gone
// when the probe returns; asking the kernel for Open vSwitch's datapath
// may load the openvswitch module, as a run on the ovs path would. The
// rest of vfleet is injected through Options, so this package imports no
// guest kind.
package doctor
