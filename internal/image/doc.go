// Package image owns the guest image: a Debian root filesystem with the
// measuring tools (the packages the registered workloads declare) and the
// vfleet agent, which every guest kind uses (the bare baseline runs the
// very same binaries from it; each container gets a copy-on-write overlay
// over it).
//
// Lifecycle: a Recipe is plain data; its hash names the image directory
// (<root>/images/<hash>/). Ensure reuses a complete image of that hash, or
// builds one with mmdebstrap into a temporary directory beside it and
// renames it into place only on success, so an interrupted build never
// leaves a half image. Builds are serialised by a lock file. The agent is
// installed (copied) whenever its checksum changes, without a rebuild.
//
// VM guests boot from files made from the image once per image and agent
// (EnsureVMBoot): an ext4 base disk in qcow2 and, when the kernel has its
// virtio drivers as modules, an initramfs written here as a newc cpio.
// They live beside the rootfs in vm-<key>/ and are made under the same
// lock, in a temporary directory renamed into place.
package image
