// Package audit says how isolated each guest of a run is, next to what its
// isolation costs: it compares the evidence the agent gathered inside the
// guest (package probe) with the same probes run on the host, property by
// property, against what a container runtime deploys by default.
package audit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/pkg/cap"

	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
)

// Verdict is how a property compares with what a container runtime
// deploys by default (containerd's and Docker's defaults, vfleet's
// `security: default`): the reference every guest is scored against.
type Verdict string

const (
	AsDefault Verdict = "as default"
	Weaker    Verdict = "weaker"
	Stronger  Verdict = "stronger"
	// Info is a fact about the guest that is no more or less isolated
	// for it.
	Info Verdict = "info"
)

// Finding is one property of a guest's isolation, with the probe and the
// raw evidence it rests on.
type Finding struct {
	Property string  `json:"property"`
	Value    string  `json:"value"`
	Verdict  Verdict `json:"verdict"`
	Probe    string  `json:"probe"`
	Evidence string  `json:"evidence"`
}

// Properties are the findings' rows, in the order reports show them.
var Properties = []string{"kernel", "capabilities", "seccomp", "no_new_privs", "lsm", "user namespace", "namespaces shared with the host",
	"host processes visible", "devices openable", "kernel settings writable", "keyctl", "kernel modules loadable", "root file system", "block devices listed"}

// runtimeDefaultCaps is the capability set containerd and Docker give a
// container by default.
var runtimeDefaultCaps = []string{"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD",
	"CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT"}

// isolatingNamespaces are those a runtime gives every container its own of.
var isolatingNamespaces = []string{"ipc", "mnt", "net", "pid", "uts"}

// Assess compares a guest's evidence with the host's (the same probes run
// by vfleet itself) and says, property by property, how isolated the guest
// is. kernel is the guest record's guest.KernelDetail: the probes cannot
// tell gVisor's application kernel from a VM's by themselves. Every
// probe's parsing is pure.
func Assess(g, host probe.Evidence, kernel string) []Finding {
	if kernel == guest.KernelGVisor {
		return gvisorKernel(g, host)
	}
	if OwnKernel(g, host) {
		return ownKernel(g, host)
	}
	return sharedKernel(g, host)
}

// sharedKernel is the assessment of a guest whose processes run on the
// host's kernel.
func sharedKernel(g, host probe.Evidence) []Finding {
	status := ParseStatus(g.Status)
	userns := ParseUIDMap(g.UIDMap)
	var f []Finding
	add := func(property, value string, v Verdict, probe, evidence string) {
		f = append(f, Finding{Property: property, Value: value, Verdict: v, Probe: probe, Evidence: strings.TrimSpace(evidence)})
	}
	if g.BootID == host.BootID {
		add("kernel", "the host's", AsDefault, "/proc/sys/kernel/random/boot_id", g.BootID+" = host "+host.BootID)
	} else {
		add("kernel", "the host's (a boot_id of its own)", AsDefault, "/proc/stat btime, /proc/sys/kernel/osrelease",
			fmt.Sprintf("btime %s = host %s, %s = host %s; boot_id %s ≠ host %s", g.BootTime, host.BootTime, g.Kernel, host.Kernel, g.BootID, host.BootID))
	}
	capValue, capVerdict := capabilities(status.Effective, userns.Mapped)
	add("capabilities", capValue, capVerdict, "/proc/self/status CapEff", fmt.Sprintf("CapEff %016x CapBnd %016x", status.EffectiveBits, status.BoundingBits))
	switch {
	case status.Seccomp == 2:
		add("seccomp", fmt.Sprintf("filter (%d)", status.SeccompFilters), AsDefault, "/proc/self/status Seccomp", statusLines(g.Status, "Seccomp"))
	case status.Seccomp == 1:
		add("seccomp", "strict", Stronger, "/proc/self/status Seccomp", statusLines(g.Status, "Seccomp"))
	default:
		add("seccomp", "none", Weaker, "/proc/self/status Seccomp", statusLines(g.Status, "Seccomp"))
	}
	if status.NoNewPrivs {
		add("no_new_privs", "set", AsDefault, "/proc/self/status NoNewPrivs", statusLines(g.Status, "NoNewPrivs"))
	} else {
		add("no_new_privs", "not set", Weaker, "/proc/self/status NoNewPrivs", statusLines(g.Status, "NoNewPrivs"))
	}
	lsm, lsmVerdict := lsmLabel(g.LSM, host.LSM)
	add("lsm", lsm, lsmVerdict, "/proc/self/attr/current", g.LSM)
	if userns.Mapped {
		add("user namespace", fmt.Sprintf("root is host ID %d", userns.RootHostID), Stronger, "/proc/self/uid_map", g.UIDMap)
	} else {
		add("user namespace", "none: root is the host's root", AsDefault, "/proc/self/uid_map", g.UIDMap)
	}
	shared := SharedNamespaces(g.Namespaces, host.Namespaces)
	nsVerdict := AsDefault
	for _, ns := range shared {
		if slices.Contains(isolatingNamespaces, ns) {
			nsVerdict = Weaker
		}
	}
	add("namespaces shared with the host", listOrNone(shared), nsVerdict, "/proc/self/ns/*", mapEvidence(g.Namespaces))
	if slices.Contains(shared, "pid") {
		add("host processes visible", fmt.Sprintf("all (%d processes)", g.Processes), Weaker, "/proc", strconv.Itoa(g.Processes)+" processes")
	} else {
		add("host processes visible", fmt.Sprintf("none (%d processes of its own)", g.Processes), AsDefault, "/proc", strconv.Itoa(g.Processes)+" processes")
	}
	opened := Opened(g.Devices)
	add("devices openable", listOrNone(opened), verdictIf(len(opened) > 0, Weaker), "open(O_RDONLY) and close", mapEvidence(g.Devices))
	writable := Opened(g.Writable)
	add("kernel settings writable", listOrNone(writable), verdictIf(len(writable) > 0, Weaker), "faccessat(W_OK)", mapEvidence(g.Writable))
	if g.Keyctl == "EPERM" || g.Keyctl == "ENOSYS" {
		add("keyctl", "blocked ("+g.Keyctl+")", AsDefault, "keyctl(KEYCTL_GET_KEYRING_ID, session, no create)", g.Keyctl)
	} else {
		add("keyctl", "allowed ("+g.Keyctl+")", Weaker, "keyctl(KEYCTL_GET_KEYRING_ID, session, no create)", g.Keyctl)
	}
	modules := slices.Contains(status.Effective, "CAP_SYS_MODULE") && !userns.Mapped && g.ModulesDisabled != "1"
	add("kernel modules loadable", yesNo(modules), verdictIf(modules, Weaker), "CapEff CAP_SYS_MODULE, /proc/sys/kernel/modules_disabled", "modules_disabled "+g.ModulesDisabled)
	add("root file system", RootFSType(g.RootMount), Info, "/proc/self/mountinfo", g.RootMount)
	add("block devices listed", listOrNone(probe.PartitionNames(g.Partitions)), Info, "/proc/partitions", g.Partitions)
	return f
}

// OwnKernel says whether a guest runs a kernel other than the host's: its
// boot_id differs, and it is not the host's kernel with a boot_id given
// to the guest (LXC gives each container its own), which the kernel's
// boot time and release, the host's, would show. Evidence recorded
// before the boot time was probed is judged by its boot_id alone.
func OwnKernel(g, host probe.Evidence) bool {
	if g.BootID == "" || g.BootID == host.BootID {
		return false
	}
	return g.BootTime == "" || g.BootTime != host.BootTime || g.Kernel != host.Kernel
}

// ownKernel is the assessment of a guest that runs its own kernel: what it
// holds inside is its own business; that it has its own kernel is the
// isolation.
func ownKernel(g, host probe.Evidence) []Finding {
	f := []Finding{{Property: "kernel", Value: "its own (" + g.Kernel + ")", Verdict: Stronger, Probe: "/proc/sys/kernel/random/boot_id",
		Evidence: g.BootID + " ≠ host " + host.BootID}}
	for _, p := range Properties[1:] {
		v := Finding{Property: p, Value: "in its own kernel", Verdict: Info, Probe: "/proc/sys/kernel/random/boot_id", Evidence: "another kernel"}
		switch p {
		case "namespaces shared with the host":
			v.Value, v.Verdict = "none (another kernel)", Stronger
		case "host processes visible":
			v.Value, v.Verdict, v.Probe, v.Evidence = fmt.Sprintf("none (%d processes of its own)", g.Processes), Stronger, "/proc", strconv.Itoa(g.Processes)+" processes"
		case "root file system":
			v.Value, v.Verdict, v.Probe, v.Evidence = RootFSType(g.RootMount), Info, "/proc/self/mountinfo", g.RootMount
		case "block devices listed":
			v.Value, v.Verdict, v.Probe, v.Evidence = listOrNone(probe.PartitionNames(g.Partitions)), Info, "/proc/partitions", strings.TrimSpace(g.Partitions)
		}
		f = append(f, v)
	}
	return f
}

// gvisorKernel is the assessment of a guest on gVisor's application
// kernel: its processes never call the host's kernel, the sandbox that
// serves them does, so what the probes read is gVisor's kernel's own
// account. The isolation rows say what that kernel enforces, as facts
// rather than scores: a capability there is not one over the host. Those
// whose reading cannot mean the same thing say so.
func gvisorKernel(g, host probe.Evidence) []Finding {
	shared := map[string]Finding{}
	for _, f := range sharedKernel(g, host) {
		shared[f.Property] = f
	}
	inGVisor := func(f Finding) Finding {
		f.Value, f.Verdict = f.Value+" (in gVisor's kernel)", Info
		return f
	}
	fact := func(f Finding, value string) Finding {
		f.Value, f.Verdict = value, Info
		return f
	}
	release := "of an unknown release"
	if fields := strings.Fields(g.Uname); len(fields) > 0 {
		release = fields[0]
	}
	f := ownKernel(g, host)
	for i, x := range f {
		switch x.Property {
		case "kernel":
			f[i] = Finding{Property: x.Property, Value: "gVisor's application kernel (says Linux " + release + "), a host process on the host's",
				Verdict: Stronger, Probe: "the guest's record; uname(2)", Evidence: g.Uname}
		case "capabilities", "devices openable", "kernel settings writable", "keyctl":
			f[i] = inGVisor(shared[x.Property])
		case "seccomp":
			// gVisor says whether a filter is on, not how many.
			f[i] = inGVisor(shared[x.Property])
			if s := ParseStatus(g.Status); s.Seccomp == 2 && statusLines(g.Status, "Seccomp_filters") == "" {
				f[i].Value = "filter (in gVisor's kernel)"
			}
		case "namespaces shared with the host":
			f[i].Value = "none (gVisor's own)"
		case "no_new_privs":
			if statusLines(g.Status, "NoNewPrivs") == "" {
				f[i] = Finding{Property: x.Property, Value: "not reported by gVisor's kernel", Verdict: Info, Probe: "/proc/self/status NoNewPrivs", Evidence: "no NoNewPrivs line"}
			} else {
				f[i] = inGVisor(shared[x.Property])
			}
		case "lsm":
			f[i] = fact(shared[x.Property], "none in gVisor's kernel")
		case "user namespace":
			f[i] = fact(shared[x.Property], "not comparable: gVisor's kernel keeps IDs of its own")
		case "kernel modules loadable":
			f[i] = fact(shared[x.Property], "no: gVisor's kernel has no modules")
		}
	}
	return f
}

// Status is what /proc/self/status says of a process's confinement.
type Status struct {
	Effective, Bounding         []string
	EffectiveBits, BoundingBits uint64
	Seccomp, SeccompFilters     int
	NoNewPrivs                  bool
}

// ParseStatus reads /proc/PID/status; the capability sets are parsed by
// containerd's reader, which names them as the runtime spec does.
func ParseStatus(status string) Status {
	var s Status
	if caps, err := cap.ParseProcPIDStatus(strings.NewReader(status)); err == nil {
		s.EffectiveBits, s.BoundingBits = caps[cap.Effective], caps[cap.Bounding]
		s.Effective, _ = cap.FromBitmap(s.EffectiveBits)
		s.Bounding, _ = cap.FromBitmap(s.BoundingBits)
	}
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Seccomp":
			s.Seccomp, _ = strconv.Atoi(v)
		case "Seccomp_filters":
			s.SeccompFilters, _ = strconv.Atoi(v)
		case "NoNewPrivs":
			s.NoNewPrivs = v == "1"
		}
	}
	return s
}

// UserNS is what a process's uid_map says.
type UserNS struct {
	// Mapped: the process's root is not the host's root.
	Mapped     bool
	RootHostID int64
}

// ParseUIDMap reads /proc/PID/uid_map. The initial namespace maps every
// ID to itself ("0 0 4294967295").
func ParseUIDMap(uidMap string) UserNS {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "0" {
			continue
		}
		host, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		return UserNS{Mapped: host != 0, RootHostID: host}
	}
	return UserNS{}
}

// SharedNamespaces are the namespaces a process shares with the host
// (same link, same kernel).
func SharedNamespaces(guest, host map[string]string) []string {
	var shared []string
	for ns, link := range guest {
		if link != "" && host[ns] == link {
			shared = append(shared, ns)
		}
	}
	slices.Sort(shared)
	return shared
}

// Opened are the probed paths whose probe succeeded.
func Opened(outcomes map[string]string) []string {
	var ok []string
	for p, v := range outcomes {
		if v == "ok" {
			ok = append(ok, p)
		}
	}
	slices.Sort(ok)
	return ok
}

// RootFSType names the file system of a mountinfo line and its source.
func RootFSType(line string) string {
	_, post, ok := strings.Cut(line, " - ")
	if !ok {
		return "unknown"
	}
	f := strings.Fields(post)
	if len(f) < 2 {
		return "unknown"
	}
	if f[0] == "overlay" {
		return "overlay (own upper layer)"
	}
	return f[0] + " on " + f[1]
}

func capabilities(eff []string, inUserNS bool) (string, Verdict) {
	var extra []string
	for _, c := range eff {
		if !slices.Contains(runtimeDefaultCaps, c) {
			extra = append(extra, strings.TrimPrefix(c, "CAP_"))
		}
	}
	missing := 0
	for _, c := range runtimeDefaultCaps {
		if !slices.Contains(eff, c) {
			missing++
		}
	}
	value := fmt.Sprintf("%d", len(eff))
	switch {
	case len(extra) > 8 && slices.Contains(extra, "SYS_ADMIN"):
		value += fmt.Sprintf(" (%d beyond the default, SYS_ADMIN among them)", len(extra))
	case len(extra) > 8:
		value += fmt.Sprintf(" (%d beyond the default)", len(extra))
	case len(extra) > 0:
		value += " (beyond the default: " + strings.Join(extra, ", ") + ")"
	case missing == 0:
		value += " (the default set)"
	default:
		value += fmt.Sprintf(" (%d fewer than the default)", missing)
	}
	switch {
	case inUserNS:
		return value + ", held in its own user namespace only", Stronger
	case len(extra) > 0:
		return value, Weaker
	case missing > 0:
		return value, Stronger
	}
	return value, AsDefault
}

// lsmLabel reads the LSM label; with no LSM on the host, having none is
// the default.
func lsmLabel(label, hostLabel string) (string, Verdict) {
	label = strings.TrimSpace(strings.TrimSuffix(label, "\x00"))
	switch {
	case strings.HasPrefix(label, "error: "):
		return "no LSM on this kernel", AsDefault
	case label == "unconfined" || label == hostLabel:
		return "unconfined", Weaker
	}
	return label, AsDefault
}

func statusLines(status, prefix string) string {
	var lines []string
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, prefix) {
			lines = append(lines, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(lines, "; ")
}

func mapEvidence(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+m[k])
	}
	return strings.Join(parts, "; ")
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func verdictIf(cond bool, v Verdict) Verdict {
	if cond {
		return v
	}
	return AsDefault
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
