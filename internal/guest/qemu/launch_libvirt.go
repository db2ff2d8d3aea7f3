package qemu

import (
	"context"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
)

// libvirtLauncher has this host's libvirt run the guest as a transient
// domain: its card is a tap libvirt's QEMU opens by name, and libvirt
// owns the monitor, the pins and the scheduling (the domain's <cputune>).
type libvirtLauncher struct {
	g    *Guest
	conn *libvirtConn
}

func (l *libvirtLauncher) accel(ctx context.Context, s *launch) (accelChoice, error) {
	return l.g.localAccel(ctx, s)
}

func (l *libvirtLauncher) stage(ctx context.Context, s *launch, _ *guest.Teardown) error {
	if err := s.makeDisk(ctx); err != nil {
		return err
	}
	t := s.spec.Tap
	if t == nil {
		return nil
	}
	s.cfg.NIC = &nicConfig{Tap: t.Name, MAC: l.g.nic.MAC.String(), OffloadsOff: t.OffloadsOff != ""}
	vhostState := "libvirt's: on when /dev/vhost-net opens"
	if s.accel.name != AccelKVM {
		vhostState = "off: used with KVM only, this VM runs under " + s.accel.name
	}
	l.g.noteNIC(s, t, netpath.VMTap.String(), vhostState, nicOffloads(t.OffloadsOff, false))
	return nil
}

func (l *libvirtLauncher) start(ctx context.Context, s *launch, undo *guest.Teardown) (*vm, error) {
	m, err := l.g.startDomain(ctx, l.conn, s.cfg, undo)
	if err != nil {
		return nil, err
	}
	s.details["libvirt"] = l.g.libvirt
	s.details["libvirt_domain"] = domainName(l.g.env.RunID, s.spec.Name)
	// Not security sandbox, which is vfleet's own user as well as the
	// filter; what libvirt set is recorded as it is.
	if s.details["qemu_sandbox"], s.details["qemu_user"], err = domainConfinement(ctx, l.conn, m.pid); err != nil {
		return nil, err
	}
	s.launched = time.Now()
	return m, nil
}

// await: the domain came with its monitor, libvirt's.
func (l *libvirtLauncher) await(ctx context.Context, s *launch, m *vm) (*agent.Client, error) {
	return awaitAgent(ctx, s, m)
}

func (l *libvirtLauncher) settle(context.Context, *launch, *vm, *agent.Client, []int) error {
	return nil
}
