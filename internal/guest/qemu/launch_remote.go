package qemu

import (
	"context"
	"maps"
	"strconv"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
)

// remoteLauncher has another host's libvirt run the guest, as this host's
// does, on files uploaded there; the guest has no card (the run's paths
// are on this host) and its record says which host ran it.
type remoteLauncher struct {
	libvirtLauncher
}

// accel asks that host's libvirt: vfleet's boot probe runs QEMU here. A
// guest there calibrates its own TSC, which is not this host's.
func (r *remoteLauncher) accel(_ context.Context, s *launch) (accelChoice, error) {
	accel, why, err := remoteAccel(r.conn, s.spec.Accel)
	return accelChoice{name: accel, why: why}, err
}

func (r *remoteLauncher) stage(ctx context.Context, s *launch, undo *guest.Teardown) error {
	return stageRemote(ctx, r.conn, domainName(r.g.env.RunID, s.spec.Name), s.qemuImg, s.base, s.baseFormat, &s.cfg, r.g.env.Ledger, undo)
}

func (r *remoteLauncher) settle(ctx context.Context, s *launch, m *vm, client *agent.Client, _ []int) error {
	// Another host's process: nothing here may read or signal it.
	s.pids = nil
	s.details["libvirt_qemu_pid"] = strconv.Itoa(m.pid)
	host, err := remoteHostDetails(ctx, r.conn, client)
	if err != nil {
		return err
	}
	maps.Copy(s.details, host)
	return nil
}
