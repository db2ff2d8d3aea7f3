package qemu

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/tools"
)

var _ guest.SpecProber = kind{}

// ProbeSpec refuses, before the run starts anything, a libvirt-managed
// guest whose libvirt does not answer, one of a user's domain it cannot
// run (image libvirt:DOMAIN, saying why), and a guest that asks for KVM
// where KVM does not boot a kernel: the same boot probe, and the same
// kept answer, as the guest's start would use. Other accelerators always
// work (auto falls back to TCG).
func (kind) ProbeSpec(ctx context.Context, spec guest.Spec, env guest.Env) error {
	if spec.Libvirt != "" {
		l, err := dialLibvirt(ctx, spec.Libvirt, "")
		if err != nil {
			return fmt.Errorf("%w: %w", guest.ErrNotSupported, err)
		}
		defer l.Close()
		if l.uri.Remote {
			// That host's accelerators are its libvirt's to say.
			if _, _, err := remoteAccel(l, spec.Accel); err != nil {
				return fmt.Errorf("%w: %w", guest.ErrNotSupported, err)
			}
			return nil
		}
	}
	if _, ok := spec.LibvirtDomain(); ok {
		if _, _, err := domainSpec(ctx, spec); err != nil {
			return err
		}
	}
	arch, archSpec, err := archOf(spec.Arch)
	if err != nil || spec.Accel != AccelKVM || emulated(arch) {
		return nil // New refuses what is wrong with the spec itself
	}
	qemuTool, err := tools.Find(archSpec.qemu)
	if err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	img, err := image.ForRootFS(env.RootFS)
	if err != nil {
		return err
	}
	_, kernel, err := vmBoot(ctx, img, spec, env.Say)
	if err != nil {
		return err
	}
	if err := kvmUsable(ctx, qemuTool, kernel, filepath.Join(img.Dir, kvmAnswerFile), env.Say); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: accel kvm: %v", guest.ErrNotSupported, err)
	}
	return nil
}

// vmBoot makes ready what a guest of vfleet's image boots (nothing for a
// user's disk) and names the kernel KVM's boot probe is asked of:
// vfleet's, which is known to boot.
func vmBoot(ctx context.Context, img *image.Image, spec guest.Spec, say func(string)) (boot image.VMBoot, probeKernel string, err error) {
	if spec.Image != "" {
		return image.VMBoot{}, img.KernelPath, nil
	}
	boot, err = image.EnsureVMBoot(ctx, img, say)
	return boot, boot.Kernel, err
}
