package lxc

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/guest"
)

// LXC's shipped configuration, which the profiles that keep LXC's
// defaults include rather than copy, so the seccomp policy and the
// capability drops are those the installed LXC deploys.
const (
	commonConf = "/usr/share/lxc/config/common.conf"
	usernsConf = "/usr/share/lxc/config/userns.conf"
)

// cfsPeriod is the CFS bandwidth period, in microseconds, a CPU limit is
// expressed against, as for the container kind.
const cfsPeriod = 100000

// ConfigOptions are the variable parts of a guest's LXC configuration.
type ConfigOptions struct {
	Name   string // the container's hostname
	RootFS string // its root file system on the host
	Init   []string
	Env    []string
	// SockDir is the host directory bind-mounted at guest.AgentSocketDir.
	SockDir string
	// AgentBinary, when set, is bound read-only at AgentPath, in an image
	// that lacks the agent.
	AgentBinary, AgentPath string
	NetNS                  string // namespace to join, empty for loopback only
	// Cgroup is the container's cgroup, Monitor the monitor's, both
	// below cgroup.Parent.
	Cgroup, Monitor string
	CPUs            string
	MemoryBytes     int64
	CPULimit        float64
	// V1 says which controllers sit on a cgroup v1 hierarchy (the others
	// are the v2 hierarchy's): LXC takes each limit under the key of the
	// hierarchy that holds its controller.
	V1       map[string]bool
	Security string
	// AppArmor says the host enables AppArmor: the confining profiles
	// then keep the profile LXC generates for each container.
	AppArmor bool
	LogFile  string
}

// PivotOf is the cgroup LXC moves the monitor of the container whose
// cgroup is containerCgroup into before it removes the monitor's.
func PivotOf(containerCgroup string) string { return path.Join(containerCgroup, "lxc.pivot") }

// errNewline refuses a value that would end its configuration line early
// and start another.
var errNewline = errors.New("a configuration value holds a line break")

// Config writes the LXC configuration of one guest. It is a pure function
// of its options, so what each profile and limit becomes is checked
// without root.
func Config(o ConfigOptions) (string, error) {
	var b strings.Builder
	var bad []string
	set := func(key, value string) {
		if strings.ContainsAny(value, "\n\r") {
			bad = append(bad, key)
		}
		fmt.Fprintf(&b, "%s = %s\n", key, value)
	}
	if err := security(set, o); err != nil {
		return "", err
	}
	set("lxc.uts.name", o.Name)
	set("lxc.rootfs.path", "dir:"+o.RootFS)
	// No getty consoles: the agent is the only way in, and LXC's ttys
	// would need a /dev/lxc the image does not have.
	set("lxc.tty.max", "0")
	set("lxc.console.path", "none")
	set("lxc.init.cmd", strings.Join(o.Init, " "))
	set("lxc.init.cwd", "/")
	for _, kv := range o.Env {
		set("lxc.environment", kv)
	}
	set("lxc.mount.entry", fstabPath(o.SockDir)+" "+fstabPath(strings.TrimPrefix(guest.AgentSocketDir, "/"))+" none bind,create=dir 0 0")
	if o.AgentBinary != "" {
		set("lxc.mount.entry", fstabPath(o.AgentBinary)+" "+fstabPath(strings.TrimPrefix(o.AgentPath, "/"))+" none bind,ro,create=file 0 0")
	}
	// A system container's init mounts /dev/shm; the agent does not, and
	// tools that share memory expect it, as an OCI container has it.
	set("lxc.mount.entry", "shm dev/shm tmpfs rw,nosuid,nodev,noexec,mode=1777,create=dir 0 0")
	if o.NetNS != "" {
		set("lxc.namespace.share.net", o.NetNS)
	} else {
		set("lxc.net.0.type", "empty")
	}
	set("lxc.cgroup.dir.container", strings.TrimPrefix(o.Cgroup, "/"))
	set("lxc.cgroup.dir.monitor", strings.TrimPrefix(o.Monitor, "/"))
	// LXC moves its monitor out of the monitor's cgroup before removing
	// it, into a cgroup lxc.pivot below this one, by default at every
	// hierarchy's root, where it is never removed: below the container's
	// own (PivotOf), vfleet removes it with the guest.
	set("lxc.cgroup.dir.monitor.pivot", strings.TrimPrefix(o.Cgroup, "/"))
	limit := func(controller, v1Key, v1Value, v2Key, v2Value string) {
		if o.V1[controller] {
			set("lxc.cgroup."+v1Key, v1Value)
		} else {
			set("lxc.cgroup2."+v2Key, v2Value)
		}
	}
	if o.CPUs != "" {
		limit("cpuset", "cpuset.cpus", o.CPUs, "cpuset.cpus", o.CPUs)
	}
	if o.MemoryBytes > 0 {
		m := strconv.FormatInt(o.MemoryBytes, 10)
		limit("memory", "memory.limit_in_bytes", m, "memory.max", m)
	}
	if o.CPULimit > 0 {
		quota := strconv.FormatInt(int64(o.CPULimit*cfsPeriod), 10)
		if o.V1["cpu"] {
			set("lxc.cgroup.cpu.cfs_period_us", strconv.Itoa(cfsPeriod))
			set("lxc.cgroup.cpu.cfs_quota_us", quota)
		} else {
			set("lxc.cgroup2.cpu.max", quota+" "+strconv.Itoa(cfsPeriod))
		}
	}
	if o.LogFile != "" {
		set("lxc.log.file", o.LogFile)
		set("lxc.log.level", "WARN")
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("lxc configuration: %w: %s", errNewline, strings.Join(bad, ", "))
	}
	return b.String(), nil
}

// fstabPath escapes a path for a mount entry, which LXC reads as a line
// of fstab: blanks separate its fields.
func fstabPath(p string) string {
	return strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`).Replace(p)
}

// security writes what the profile deploys. Every profile starts from
// LXC's own defaults (common.conf); the others take away from them.
func security(set func(key, value string), o ConfigOptions) error {
	set("lxc.include", commonConf)
	confined := o.AppArmor
	switch o.Security {
	case guest.SecurityDefault:
	case guest.SecurityUserNS:
		set("lxc.include", usernsConf)
		for _, kind := range []string{"u", "g"} {
			set("lxc.idmap", fmt.Sprintf("%s 0 %d %d", kind, guest.UserNSHostID, guest.UserNSSize))
		}
		if o.NetNS != "" {
			// A user namespace may mount sysfs only over a network
			// namespace it owns; the run's is vfleet's. The host's, read
			// only, as the container kind does.
			set("lxc.mount.auto", "")
			set("lxc.mount.auto", "cgroup:mixed proc:mixed")
			set("lxc.mount.entry", "/sys sys none rbind,ro,create=dir 0 0")
		}
	case guest.SecurityUnconfined:
		set("lxc.seccomp.profile", "")
		confined = false
	case guest.SecurityPrivileged:
		set("lxc.seccomp.profile", "")
		set("lxc.cap.drop", "")
		set("lxc.cgroup.devices.deny", "")
		set("lxc.cgroup.devices.allow", "")
		set("lxc.cgroup2.devices.deny", "")
		set("lxc.cgroup2.devices.allow", "")
		set("lxc.cgroup.devices.allow", "a")
		set("lxc.cgroup2.devices.allow", "a")
		set("lxc.mount.auto", "")
		set("lxc.mount.auto", "cgroup:rw proc:rw sys:rw")
		// The host's devices, as `--privileged` gives them.
		set("lxc.autodev", "0")
		set("lxc.mount.entry", "/dev dev none rbind,create=dir 0 0")
		confined = false
	default:
		return fmt.Errorf("unknown security profile %q", o.Security)
	}
	if !confined {
		set("lxc.apparmor.profile", "unconfined")
	}
	return nil
}
