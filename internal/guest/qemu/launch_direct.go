package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
)

// directLauncher boots the guest in a QEMU that vfleet starts: its card
// is a device QEMU inherits open, it may be sandboxed, and its vCPU
// threads are pinned and prioritised from here.
type directLauncher struct {
	g *Guest
	// cred is the user a sandboxed QEMU runs as; nil runs it as vfleet's.
	cred *syscall.Credential
}

func (d *directLauncher) accel(ctx context.Context, s *launch) (accelChoice, error) {
	return d.g.localAccel(ctx, s)
}

func (d *directLauncher) stage(ctx context.Context, s *launch, _ *guest.Teardown) error {
	if err := s.makeDisk(ctx); err != nil {
		return err
	}
	if err := d.attachNIC(s); err != nil {
		return err
	}
	if !d.g.sandbox {
		return nil
	}
	cred, err := d.g.confine(&s.cfg, s.accel.name, s.img, s.base)
	if err != nil {
		return err
	}
	d.cred = cred
	s.details["security"], s.details["qemu_sandbox"], s.details["qemu_user"] = guest.SecuritySandbox, sandboxFilter, strconv.Itoa(int(cred.Uid))
	return nil
}

// attachNIC gives the guest its card on the device the run's path made
// for it in the run's host side: a tap or macvtap, or a stream to passt,
// which QEMU inherits open, or a PCI device lent whole.
func (d *directLauncher) attachNIC(s *launch) error {
	t := s.spec.Tap
	if t == nil {
		return nil
	}
	dev, kind, err := netpath.OpenVMDevice(t.NSPath, t.Name)
	if err != nil {
		return err
	}
	nic := &nicConfig{MAC: d.g.nic.MAC.String(), OffloadsOff: t.OffloadsOff != "", Stream: kind == netpath.VMPasst}
	vhostState, offload := "off: passt moves the frames, through a stream", nicOffloads(t.OffloadsOff, nic.Stream)
	switch {
	case kind == netpath.VMVFIO:
		nic.VFIO = t.Name
		vhostState, offload = "off: the VM's own driver runs the lent device", "the lent device's own, as its driver in the VM sets them"
	default:
		nic.FD = s.inherit(dev)
		if !nic.Stream {
			var vhost *os.File
			if vhost, vhostState = openVhostNet(s.accel.name, VhostNetDevice); vhost != nil {
				nic.VhostFD = s.inherit(vhost)
			}
		}
	}
	s.cfg.NIC = nic
	d.g.noteNIC(s, t, kind.String(), vhostState, offload)
	return nil
}

func (d *directLauncher) start(_ context.Context, s *launch, undo *guest.Teardown) (*vm, error) {
	m, err := startQEMU(d.g.qemu.Path, s.cfg, d.cred, s.extra, filepath.Join(d.g.dir, "qemu.log"), d.g.env, undo)
	if err != nil {
		return nil, err
	}
	s.launched = time.Now()
	return m, nil
}

func (d *directLauncher) await(ctx context.Context, s *launch, m *vm) (*agent.Client, error) {
	if _, err := d.dialMonitor(ctx, s, m); err != nil {
		return nil, err
	}
	return awaitAgent(ctx, s, m)
}

// dialMonitor connects to the monitor of the QEMU vfleet started, once it
// has made its socket.
func (d *directLauncher) dialMonitor(ctx context.Context, s *launch, m *vm) (*qmpClient, error) {
	sctx, cancel := context.WithTimeout(ctx, socketWait)
	defer cancel()
	mon, err := waitQMP(sctx, s.cfg.QMPSocket, m.exited)
	if err != nil {
		return nil, bootError(m, d.g.dir, s.cfg.ConsoleLog, err)
	}
	m.mon = mon
	return mon, nil
}

func (d *directLauncher) settle(_ context.Context, s *launch, _ *vm, _ *agent.Client, threads []int) error {
	if d.g.pins != nil {
		if err := pinThreads(threads, d.g.pins); err != nil {
			return err
		}
	}
	if s.spec.RTPriority > 0 {
		return makeRealtime(threads, s.spec.RTPriority)
	}
	return nil
}
