package qemu

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
)

// cloneLauncher starts the guest as vfleet's own QEMU does, but resumes
// the saved template of its shape instead of booting, and then gives the
// resumed guest its own identity.
type cloneLauncher struct {
	directLauncher
	tpl template
	// stateFD is the template's saved state's descriptor in QEMU.
	stateFD int
}

func (c *cloneLauncher) stage(ctx context.Context, s *launch, undo *guest.Teardown) error {
	g := c.g
	shape := templateShape{
		QEMU: qemuIdentity(ctx, g.qemu), Machine: g.machine, Accel: s.accel.name, VCPUs: g.vcpus, MemoryMiB: g.memMiB,
		Kernel: s.boot.Kernel, Initramfs: s.boot.Initramfs, BaseDisk: s.boot.BaseDisk, NIC: s.spec.Tap != nil,
		OffloadsOff: s.spec.Tap != nil && s.spec.Tap.OffloadsOff != "",
	}
	// The template boots as no guest in particular: no address, its own
	// name; a clone takes its identity after the restore.
	s.cfg.Cmdline = kernelCmdline(g.archSpec.console, s.boot.Root, "template", g.env.AgentPath, guest.ScratchDir, s.accel.tscKHz, nil)
	s.cfg.TranslationMiB = cloneTranslationMiB
	shape.Cmdline = s.cfg.Cmdline
	var err error
	if c.tpl, err = ensureTemplate(ctx, templateBuilder{qemu: g.qemu.Path, qemuImg: s.qemuImg, cfg: s.cfg, env: g.env}, shape); err != nil {
		return err
	}
	state, err := os.Open(c.tpl.State)
	if err != nil {
		return err
	}
	c.stateFD = s.inherit(state)
	s.cfg.RAM = &ramFile{Path: c.tpl.RAM}
	s.cfg.Incoming = true
	s.base = c.tpl.Disk
	return c.directLauncher.stage(ctx, s, undo)
}

// await records where a clone's start goes: QEMU up to its monitor, the
// state loaded and running, the agent's hello, the identity taken on.
func (c *cloneLauncher) await(ctx context.Context, s *launch, m *vm) (*agent.Client, error) {
	mon, err := c.dialMonitor(ctx, s, m)
	if err != nil {
		return nil, err
	}
	steps := map[string]string{"clone_qemu_up": time.Since(s.launched).String()}
	rctx, rcancel := context.WithTimeout(ctx, socketWait)
	err = mon.restoreState(rctx, c.stateFD)
	rcancel()
	if err != nil {
		return nil, bootError(m, c.g.dir, s.cfg.ConsoleLog, fmt.Errorf("restore the template's state: %w", err))
	}
	steps["clone_restored"] = time.Since(s.launched).String()
	client, err := awaitAgent(ctx, s, m)
	if err != nil {
		return nil, err
	}
	steps["clone_agent_hello"] = time.Since(s.launched).String()
	if err := c.g.become(ctx, client); err != nil {
		client.Close()
		return nil, err
	}
	maps.Copy(s.details, steps)
	return client, nil
}

func (c *cloneLauncher) settle(ctx context.Context, s *launch, m *vm, client *agent.Client, threads []int) error {
	maps.Copy(s.details, cloneDetails(c.tpl))
	return c.directLauncher.settle(ctx, s, m, client, threads)
}
