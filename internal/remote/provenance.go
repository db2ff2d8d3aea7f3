package remote

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// Fingerprint describes the peer as hostinfo describes this host, read
// over SSH with hostinfo's own parsers: kernel, CPU, memory, CPUs online,
// SMT, governor; the NIC named (driver, firmware, offloads, which needs
// ethtool there) unless nic is empty; and the versions of the programs
// found (CheckPrograms), by package, as a run records its image's.
func (m *Machine) Fingerprint(ctx context.Context, nic string, found []Found) (hostinfo.Fingerprint, error) {
	var fp hostinfo.Fingerprint
	out, err := m.Run(ctx, nil, "uname", "-n", "-r", "-m")
	if err != nil {
		return fp, err
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return fp, fmt.Errorf("uname on %s said %q", m.Target, out)
	}
	fp.Hostname, fp.Kernel, fp.Arch = f[0], f[1], f[2]
	if out, err = m.Run(ctx, nil, "uname", "-v"); err != nil {
		return fp, err
	}
	fp.KernelFull = strings.TrimSpace(string(out))

	cpu, err := parseRemote(ctx, m, "/proc/cpuinfo", procfs.ParseCPUInfo)
	if err != nil {
		return fp, err
	}
	fp.CPUModel, fp.Microcode = cpu.Model, cpu.Microcode
	if cpu.Hypervisor {
		// As hostinfo says of this host: DMI names the hypervisor when
		// there is DMI at all.
		fp.Virtualized = cmp.Or(m.optionalLine(ctx, "/sys/class/dmi/id/sys_vendor"), "yes")
	}
	if fp.MemTotalKiB, err = parseRemote(ctx, m, "/proc/meminfo", procfs.ParseMemTotal); err != nil {
		return fp, err
	}
	if fp.OnlineCPUs, err = parseRemote(ctx, m, "/sys/devices/system/cpu/online", procfs.ParseCPUListCount); err != nil {
		return fp, err
	}
	fp.SMT = m.optionalLine(ctx, "/sys/devices/system/cpu/smt/control")
	fp.Governor = m.optionalLine(ctx, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	if nic != "" {
		if fp.NIC, err = m.nic(ctx, nic); err != nil {
			return fp, err
		}
	}
	if len(found) > 0 {
		fp.ToolVersions = map[string]string{}
		for _, p := range found {
			if p.Version != "" {
				fp.ToolVersions[p.Package] = p.Version
			}
		}
	}
	return fp, nil
}

func (m *Machine) nic(ctx context.Context, name string) (*hostinfo.NIC, error) {
	if _, err := m.CheckPrograms(ctx, []programs.Program{Ethtool}); err != nil {
		return nil, fmt.Errorf("describe %s on %s: %w", name, m.Target, err)
	}
	n, err := hostinfo.DescribeNIC(name, func(args ...string) ([]byte, error) {
		return m.Run(ctx, nil, append([]string{"ethtool"}, args...)...)
	})
	if err != nil {
		return nil, fmt.Errorf("describe %s on %s: %w", name, m.Target, err)
	}
	return n, nil
}

// parseRemote reads a file of the peer and hands it to a hostinfo parser.
func parseRemote[T any](ctx context.Context, m *Machine, path string, parse func(io.Reader) (T, error)) (T, error) {
	out, err := m.Run(ctx, nil, "cat", path)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(bytes.NewReader(out))
	if err != nil {
		return v, fmt.Errorf("parse %s of %s: %w", path, m.Target, err)
	}
	return v, nil
}

// optionalLine is a one-line file of the peer that many machines lack (no
// SMT control, no cpufreq driver in a VM): absent, it is empty.
func (m *Machine) optionalLine(ctx context.Context, path string) string {
	out, _ := m.sh(ctx, nil, `[ -r "$1" ] && cat "$1"; true`, path)
	return strings.TrimSpace(string(out))
}
