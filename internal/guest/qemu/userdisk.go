package qemu

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/tools"
)

// userDiskBoot is how a guest boots the user's disk, which vfleet leaves
// unchanged: either the user's kernel with an initramfs that starts
// vfleet's agent beside the image's own init, or UEFI firmware and the
// disk's own boot loader, with the agent brought by a cloud-init seed.
type userDiskBoot struct {
	disk      image.UserDisk
	initrd    string // the user's own, empty for none
	initramfs string
	cmdline   string
	firmware  *firmwareFiles // set for a UEFI boot, with seed
	seed      string
}

// besideDir, beside vfleet's image, holds the initramfs files of users'
// initrds with the agent appended, which guests share.
const besideDir = "initramfs-beside"

// userDisk puts in the launch, in place of vfleet's image, the user's
// disk the spec names, or the disk of the user's libvirt domain.
func (g *Guest) userDisk(ctx context.Context, s *launch, undo *guest.Teardown) error {
	if _, ok := s.spec.LibvirtDomain(); ok {
		var dom userDomain
		var err error
		if s.spec, dom, err = domainSpec(ctx, s.spec); err != nil {
			return err
		}
		maps.Copy(s.details, dom.details())
		if s.diskMode == DiskOverlay {
			// A copy is the guest's own once made; an overlay reads the
			// domain's disk all along. QEMU's image locks keep the domain
			// from starting while the guest's QEMU holds the overlay, where
			// the file system has them (not all NFS mounts do), and do not
			// cover the moments before it opens it.
			watch, err := watchSource(g.libvirt, dom)
			if err != nil {
				return err
			}
			// First in, so last out: checked once the guest's own domain
			// is gone.
			undo.Push(func() error { g.checkSource(watch); return nil })
		}
	}
	if s.spec.Image == "" {
		return nil
	}
	user, err := g.userBoot(ctx, s.spec, s.qemuImg, s.accel.tscKHz, filepath.Join(s.img.Dir, besideDir))
	if err != nil {
		return err
	}
	s.cfg.Kernel, s.cfg.Initramfs, s.cfg.Cmdline = s.spec.Boot.Kernel, user.initramfs, user.cmdline
	s.cfg.Firmware, s.cfg.Seed = user.firmware, user.seed
	s.base, s.baseFormat = s.spec.Image, user.disk.Format
	maps.Copy(s.details, user.details())
	return nil
}

// userBoot prepares the boot of the user's disk spec names in the
// guest's directory, or for the initramfs, in shared, where guests of the
// same agent and initrd find it made.
func (g *Guest) userBoot(ctx context.Context, spec guest.Spec, qemuImg string, tscKHz int64, shared string) (userDiskBoot, error) {
	disk, err := image.InspectDisk(ctx, qemuImg, spec.Image)
	if err != nil {
		return userDiskBoot{}, err
	}
	if g.env.AgentBinary == "" {
		return userDiskBoot{}, errors.New("a user's disk needs the host's static agent to bring in (guest.Env.AgentBinary)")
	}
	if spec.Firmware == guest.FirmwareUEFI {
		genisoimage, err := tools.Find("genisoimage")
		if err != nil {
			return userDiskBoot{}, err
		}
		fw := &firmwareFiles{Code: g.archSpec.uefi.code, Vars: filepath.Join(g.dir, "efivars.fd")}
		if err := regfile.CopyFile(g.archSpec.uefi.vars, fw.Vars, 0o600, guest.MaxFirmwareBytes); err != nil {
			return userDiskBoot{}, err
		}
		seed := filepath.Join(g.dir, "seed.iso")
		params := strings.Join(besideParams(spec.Name, g.nic), " ")
		if err := writeSeed(ctx, genisoimage.Path, seed, g.env.AgentBinary, spec.Name, params); err != nil {
			return userDiskBoot{}, err
		}
		return userDiskBoot{disk: disk, firmware: fw, seed: seed}, nil
	}
	initramfs, err := image.EnsureBesideInitramfs(shared, g.env.AgentBinary, spec.Boot.Initrd, vminit.BesideInitPath)
	if err != nil {
		return userDiskBoot{}, err
	}
	return userDiskBoot{disk: disk, initrd: spec.Boot.Initrd, initramfs: initramfs,
		cmdline: userCmdline(spec.Boot.Cmdline, g.archSpec.console, spec.Name, tscKHz, g.nic)}, nil
}

// details is what the guest's record says of its boot.
func (u userDiskBoot) details() map[string]string {
	d := map[string]string{"image": u.disk.Path, "image_format": u.disk.Format, "image_virtual_size": strconv.FormatInt(u.disk.VirtualSize, 10)}
	if u.firmware != nil {
		d["firmware"] = "uefi: " + u.firmware.Code
		d["agent_via"] = "cloud-init NoCloud seed"
		return d
	}
	d["initrd"], d["cmdline"] = u.initrd, u.cmdline
	d["initramfs"] = "the user's initrd with vfleet's agent appended as " + vminit.BesideInitPath
	d["agent_via"] = "initramfs"
	return d
}
