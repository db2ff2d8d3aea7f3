package qemu

import (
	"context"
	"errors"
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
