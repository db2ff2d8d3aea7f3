package container

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// cfsPeriod is the CFS bandwidth period, in microseconds, a CPU limit is
// expressed against: the kernel's default, short enough that a cap shows as
// a steady rate rather than long stalls.
const cfsPeriod = 100000

// ociVersion is the runtime-spec version the bundles declare: the oldest
// that has everything used here, so runtimes packaged by distributions
// (runc 1.1 speaks 1.0.2) accept them.
const ociVersion = "1.0.2"

// BundleOptions are the variable parts of a bundle.
type BundleOptions struct {
	Hostname    string
	RootPath    string // the container's root filesystem on the host
	Args        []string
	Env         []string
	CgroupsPath string
	CPUs        string  // cpuset list, empty for no restriction
	MemoryBytes int64   // 0 for no limit
	CPULimit    float64 // CPUs' worth of CPU time per period, 0 for no cap
	NetNS       string  // network namespace to join, empty for a new one
	// RTPriority, above 0, lets the container's processes use real-time
	// scheduling and lock memory (CAP_SYS_NICE, CAP_IPC_LOCK), as a
	// timer-latency measurement needs. The capability allows every
	// priority: an RLIMIT_RTPRIO above the host's cannot be set from inside
	// the container (raising a hard limit needs CAP_SYS_RESOURCE there).
	RTPriority int
	// RTRuntimeUS is the container's real-time budget per second under
	// cgroup v1 real-time group scheduling, 0 where the kernel has none
	// (cgroup v2 or no CONFIG_RT_GROUP_SCHED): without a budget such a
	// cgroup's tasks cannot be made real-time at all.
	RTRuntimeUS int64
	// Binds are extra bind mounts: host path -> container path.
	Binds []Bind
	// Security is the profile the container runs under (guest.Security*);
	// empty is unconfined.
	Security string
	// AppArmorProfile is the loaded AppArmor profile a confined container
	// runs under; empty where the host has no AppArmor.
	AppArmorProfile string
}

// Bind is one bind mount into the container.
type Bind struct {
	Source, Destination string
	ReadOnly            bool
}

// defaultCaps is the capability set a container process gets: the usual
// unprivileged-container set, enough for every measuring tool in the image.
var defaultCaps = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP",
	"CAP_SETUID", "CAP_SYS_CHROOT",
}

// Bundle builds the OCI configuration of a container. Except for the
// privileged profile, which takes the host's capabilities and devices, it
// is a pure function of its options, so the configuration can be checked
// without root.
func Bundle(o BundleOptions) (*specs.Spec, error) {
	s := &specs.Spec{
		Version:  ociVersion,
		Hostname: o.Hostname,
		Root:     &specs.Root{Path: o.RootPath},
		Process: &specs.Process{
			Args: o.Args,
			Env:  o.Env,
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: defaultCaps, Effective: defaultCaps, Permitted: defaultCaps,
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			// /tmp as tmpfs like most container engines; file-I/O workloads
			// write to /var/tmp, which stays on the overlay.
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: o.CgroupsPath,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: o.NetNS},
			},
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			MaskedPaths: []string{"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	for _, b := range o.Binds {
		opts := []string{"rbind", "rprivate"}
		if b.ReadOnly {
			opts = append(opts, "ro")
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: b.Destination, Type: "bind", Source: b.Source, Options: opts})
	}
	if o.CPUs != "" || o.CPULimit > 0 {
		s.Linux.Resources.CPU = &specs.LinuxCPU{Cpus: o.CPUs}
	}
	if o.CPULimit > 0 {
		period := uint64(cfsPeriod)
		quota := int64(o.CPULimit * cfsPeriod)
		s.Linux.Resources.CPU.Period, s.Linux.Resources.CPU.Quota = &period, &quota
	}
	if o.MemoryBytes > 0 {
		limit := o.MemoryBytes
		s.Linux.Resources.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	if o.RTPriority > 0 {
		// Locked memory too: a real-time measurement locks its pages so a
		// page fault cannot pass for scheduling latency.
		caps := append(append([]string(nil), defaultCaps...), "CAP_SYS_NICE", "CAP_IPC_LOCK")
		s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}
	}
	if o.RTPriority > 0 && o.RTRuntimeUS > 0 {
		if s.Linux.Resources.CPU == nil {
			s.Linux.Resources.CPU = &specs.LinuxCPU{}
		}
		period, runtime := uint64(rtPeriodUS), o.RTRuntimeUS
		s.Linux.Resources.CPU.RealtimePeriod, s.Linux.Resources.CPU.RealtimeRuntime = &period, &runtime
	}
	return s, applySecurity(s, o)
}
