package hostinfo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vfleet/vfleet/internal/procfs"
	"golang.org/x/sys/unix"
)

// Options says where the proc and sys filesystems are; tests point them at
// fixture trees.
type Options struct {
	ProcRoot string // default "/proc"
	SysRoot  string // default "/sys"
	// BootRoot holds the kernels' config-<release> files, read when the
	// running kernel keeps no configuration of its own in /proc.
	BootRoot string // default "/boot"
	// EtcRoot holds machine-id.
	EtcRoot string // default "/etc"
}

func (o Options) withDefaults() Options {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.BootRoot == "" {
		o.BootRoot = "/boot"
	}
	if o.EtcRoot == "" {
		o.EtcRoot = "/etc"
	}
	return o
}

// Collect fingerprints the host. VfleetVer and ToolVersions are left for
// the caller, which knows the build and the guest image.
func Collect(opts Options) (Fingerprint, error) {
	opts = opts.withDefaults()
	var fp Fingerprint

	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fp, fmt.Errorf("uname: %w", err)
	}
	fp.Hostname = unix.ByteSliceToString(uts.Nodename[:])
	fp.Kernel = unix.ByteSliceToString(uts.Release[:])
	fp.KernelFull = unix.ByteSliceToString(uts.Version[:])
	fp.Arch = unix.ByteSliceToString(uts.Machine[:])

	cpu, err := parseWith(filepath.Join(opts.ProcRoot, "cpuinfo"), procfs.ParseCPUInfo)
	if err != nil {
		return fp, err
	}
	fp.CPUModel, fp.Microcode = cpu.Model, cpu.Microcode
	if cpu.Hypervisor {
		fp.Virtualized = hypervisorVendor(opts.SysRoot)
	}
	// Two machines may share a host name; a system without a machine-id
	// (a minimal container) is named by the rest.
	if fp.MachineID, err = optionalLine(filepath.Join(opts.EtcRoot, "machine-id")); err != nil {
		return fp, err
	}

	if fp.MemTotalKiB, err = parseWith(filepath.Join(opts.ProcRoot, "meminfo"), procfs.ParseMemTotal); err != nil {
		return fp, err
	}
	cpuDir := filepath.Join(opts.SysRoot, "devices", "system", "cpu")
	if fp.OnlineCPUs, err = parseWith(filepath.Join(cpuDir, "online"), procfs.ParseCPUListCount); err != nil {
		return fp, err
	}
	// Both are absent on many hosts (no SMT control, no cpufreq driver in a
	// VM); absence is a fact worth storing as empty, not a failure.
	if fp.SMT, err = optionalLine(filepath.Join(cpuDir, "smt", "control")); err != nil {
		return fp, err
	}
	if fp.Governor, err = optionalLine(filepath.Join(cpuDir, "cpu0", "cpufreq", "scaling_governor")); err != nil {
		return fp, err
	}
	if fp.CgroupMode, err = CgroupMode(opts.SysRoot); err != nil {
		return fp, err
	}
	fp.RealTime = collectRealTime(opts, fp.Kernel, fp.KernelFull)
	return fp, nil
}

// parseWith opens path and hands it to a pure parser.
func parseWith[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("host fingerprint: %w", err)
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return v, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// optionalLine reads a one-line sysfs attribute that may be absent.
func optionalLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("host fingerprint: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// hypervisorVendor names the hypervisor when DMI says which one; many
// microVMs expose no DMI at all, and then all we know is that there is one.
func hypervisorVendor(sysRoot string) string {
	if v, err := optionalLine(filepath.Join(sysRoot, "class", "dmi", "id", "sys_vendor")); err == nil && v != "" {
		return v
	}
	return "yes"
}
