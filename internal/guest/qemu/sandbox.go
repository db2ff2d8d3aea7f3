package qemu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
)

// sandboxFilter is QEMU's own seccomp filter at its strictest, as libvirt
// applies it: no obsolete system calls, no set*id, no new processes, no
// changes to CPU affinity or scheduling. vfleet pins and prioritises vCPU
// threads from outside, so resourcecontrol=deny costs it nothing.
const sandboxFilter = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

// kvmDevice is the device a KVM guest's QEMU opens.
const kvmDevice = "/dev/kvm"

// vmSecurity are the profiles a VM takes, the default first.
var vmSecurity = []string{guest.SecurityUnconfined, guest.SecuritySandbox}

// checkSandbox refuses what a sandboxed QEMU cannot do.
func checkSandbox(spec guest.Spec) error {
	if spec.Launch == LaunchClone {
		return errors.New("security sandbox: a clone's QEMU reads its template's saved state and memory, which stay the host root's; use launch: boot")
	}
	return nil
}

// confine readies a sandboxed QEMU's start: QEMU's seccomp filter, and
// an unprivileged user that owns the guest's directory and can read every
// other file QEMU opens.
func (g *Guest) confine(cfg *launchConfig, accel string, img *image.Image, baseDisk string) (*syscall.Credential, error) {
	cred, err := sandboxCredential(accel)
	if err != nil {
		return nil, err
	}
	cfg.Sandbox = true
	fwVars := ""
	if cfg.Firmware != nil {
		fwVars = g.archSpec.uefi.vars
	}
	reads, err := sandboxReads(*cfg, g.Spec().Boot.Initrd, fwVars, baseDisk)
	if err != nil {
		return nil, err
	}
	roots := []string{filepath.Dir(filepath.Dir(g.env.StateDir)), filepath.Dir(filepath.Dir(img.Dir))}
	return cred, openToSandbox(g.dir, roots, reads)
}

// sandboxCredential is who a sandboxed QEMU runs as: an unprivileged user
// of its own, and the group of /dev/kvm when KVM is used, so that the
// device opens as it does for libvirt's qemu user.
func sandboxCredential(accel string) (*syscall.Credential, error) {
	cred := &syscall.Credential{Uid: guest.SandboxHostID, Gid: guest.SandboxHostID}
	if accel != AccelKVM {
		return cred, nil
	}
	st, err := os.Stat(kvmDevice)
	if err != nil {
		return nil, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	if st.Mode().Perm()&0o060 != 0o060 {
		return nil, fmt.Errorf("security sandbox: %s is %v, so a QEMU that is not root cannot use it; give its group read and write (as the kvm group has on most distributions) or use accel tcg", kvmDevice, st.Mode().Perm())
	}
	cred.Groups = []uint32{sys.Gid}
	return cred, nil
}

// sandboxReads are the files outside the guest's directory that a
// sandboxed guest gets, which its QEMU's user must be able to read: those
// QEMU opens, those root copies for it into the guest's directory (the
// user's initrd into the initramfs, the firmware's variables, the disk
// in the copy and raw modes), and every file of the disk's backing chain,
// which QEMU opens through the guest's overlay or copy.
func sandboxReads(cfg launchConfig, userInitrd, firmwareVars, baseDisk string) ([]string, error) {
	reads := []string{cfg.Kernel, cfg.Initramfs, cfg.Seed, userInitrd, firmwareVars, baseDisk}
	if cfg.Firmware != nil {
		reads = append(reads, cfg.Firmware.Code)
	}
	chain, err := image.BackingChain(baseDisk)
	if err != nil {
		return nil, fmt.Errorf("security sandbox: %w", err)
	}
	return append(reads, chain...), nil
}

// openToSandbox gives the guest's directory to the sandboxed QEMU's user
// once it has checked that the user can read every other file it opens.
// Directories of vfleet's own (under one of roots) that others cannot
// search are made searchable, never listable; anything else it cannot
// read is refused, naming the file, before the directory (with root's
// copies in it) is given.
func openToSandbox(guestDir string, roots, reads []string) error {
	for _, f := range append(reads, guestDir) {
		if f == "" {
			continue
		}
		if err := guest.Searchable(filepath.Dir(f), roots, guest.SandboxHostID); err != nil {
			return err
		}
	}
	for _, f := range reads {
		if f == "" {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o004 == 0 {
			return fmt.Errorf("security sandbox: QEMU runs as user %d and cannot read %s (mode %v): make it readable by others or use security unconfined",
				guest.SandboxHostID, f, st.Mode().Perm())
		}
	}
	err := filepath.WalkDir(guestDir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, guest.SandboxHostID, guest.SandboxHostID)
	})
	if err != nil {
		return fmt.Errorf("security sandbox: give %s to QEMU's user: %w", guestDir, err)
	}
	return nil
}
