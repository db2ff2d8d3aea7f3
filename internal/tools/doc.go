// Package tools is the one place vfleet finds the external programs it
// drives on the host (OCI runtimes, QEMU, the image builder, the BPF
// compiler, Open vSwitch), learns their versions, and knows which Debian package, or
// which upstream release for what Debian does not ship, provides each, so
// that every "missing" error tells the user what to install.
//
// It owns the table of the tools vfleet's packages share and the pure
// parsers of their version banners; a package that alone drives a tool (a
// guest kind's runtime) registers it from its own init (Register), so a
// new kind's program needs no edit here. It starts no long-lived process.
package tools
