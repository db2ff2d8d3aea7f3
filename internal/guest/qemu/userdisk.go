package qemu

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
)

// userDiskBoot is how a guest boots the user's disk: the user's kernel
// with an initramfs that starts vfleet's agent beside the image's own
// init, which vfleet leaves unchanged.
type userDiskBoot struct {
	disk      image.UserDisk
	initrd    string // the user's own, empty for none
	initramfs string
	cmdline   string
}

// userBoot prepares the boot of the user's disk in the guest's directory.
func (g *Guest) userBoot(ctx context.Context, qemuImg string, tscKHz int64) (userDiskBoot, error) {
	spec := g.Spec()
	disk, err := image.InspectDisk(ctx, qemuImg, spec.Image)
	if err != nil {
		return userDiskBoot{}, err
	}
	if g.env.AgentBinary == "" {
		return userDiskBoot{}, errors.New("a user's disk needs the host's static agent to bring in (guest.Env.AgentBinary)")
	}
	initramfs := filepath.Join(g.dir, "initramfs.img")
	if err := image.WriteBesideInitramfs(initramfs, g.env.AgentBinary, spec.Boot.Initrd, vminit.BesideInitPath); err != nil {
		return userDiskBoot{}, err
	}
	return userDiskBoot{disk: disk, initrd: spec.Boot.Initrd, initramfs: initramfs, cmdline: userCmdline(spec.Boot.Cmdline, g.archSpec.console, spec.Name, tscKHz, g.nic)}, nil
}

// details is what the guest's record says of its boot.
func (u userDiskBoot) details() map[string]string {
	return map[string]string{
		"image": u.disk.Path, "image_format": u.disk.Format, "image_virtual_size": strconv.FormatInt(u.disk.VirtualSize, 10),
		"initrd": u.initrd, "initramfs": "the user's initrd with vfleet's agent appended as " + vminit.BesideInitPath, "cmdline": u.cmdline,
	}
}
