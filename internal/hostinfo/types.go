package hostinfo

import "strings"

// Fingerprint identifies the host a run was measured on. Two runs are only
// comparable when their fingerprints agree on what matters (CPU, kernel,
// microcode), so every run stores one.
type Fingerprint struct {
	Hostname     string            `json:"hostname"`
	MachineID    string            `json:"machine_id,omitempty"` // /etc/machine-id; empty in older runs and where there is none
	Kernel       string            `json:"kernel"`               // uname -r
	KernelFull   string            `json:"kernel_version"`
	Arch         string            `json:"arch"`
	CPUModel     string            `json:"cpu_model"`
	Microcode    string            `json:"microcode,omitempty"`
	OnlineCPUs   int               `json:"online_cpus"`
	SMT          string            `json:"smt,omitempty"`      // "on", "off", "notsupported", ...
	Governor     string            `json:"governor,omitempty"` // cpufreq governor of cpu0
	MemTotalKiB  int64             `json:"mem_total_kib"`
	CgroupMode   string            `json:"cgroup_mode"` // "v1", "v2", "hybrid"
	Virtualized  string            `json:"virtualized,omitempty"`
	VfleetVer    string            `json:"vfleet_version"`
	ToolVersions map[string]string `json:"tool_versions,omitempty"` // measuring tools in the guest image, runtimes on the host
	RealTime     RealTime          `json:"real_time,omitzero"`      // omitted when nothing was recorded, as in older runs
	NIC          *NIC              `json:"nic,omitempty"`           // the interface measured across, when one was named
}

// Machine names the machine a run was measured on, for what belongs to a
// machine rather than to one run (a scenario's baseline, a series over
// time, the machines runs were spread over): its host name, which is
// what a user recognises, with its architecture, CPU model and the start
// of its machine-id, so that two boxes of one name are two machines. A
// new kernel, microcode or tool version is the same machine changed. A
// run imported from another machine keeps its own.
func (f Fingerprint) Machine() string {
	name := f.Hostname
	if name == "" {
		name = "unknown host"
	}
	var about []string
	for _, s := range []string{f.Arch, f.CPUModel, shortMachineID(f.MachineID)} {
		if s != "" {
			about = append(about, s)
		}
	}
	if len(about) == 0 {
		return name
	}
	return name + " (" + strings.Join(about, ", ") + ")"
}

// Named says whether name names the machine f is of, in either form a
// command takes: its host name, or the whole name Machine gives it.
func (f Fingerprint) Named(name string) bool {
	return MachineNamed(f.Machine(), name)
}

// MachineNamed says whether name names machine, a name Machine gave (or,
// stored before machines were named by more, a host name alone): the
// whole of it, or its host name.
func MachineNamed(machine, name string) bool {
	return name != "" && (machine == name || strings.HasPrefix(machine, name+" ("))
}

// shortMachineID is enough of a machine-id to tell a few machines apart
// in a name.
func shortMachineID(id string) string {
	if id == "" {
		return ""
	}
	return "id " + id[:min(len(id), 8)]
}

// SameMachine says whether two fingerprints are of one machine, as
// Machine names it; a fingerprint that recorded no machine-id (a run from
// before it was recorded) matches on the rest.
func (f Fingerprint) SameMachine(o Fingerprint) bool {
	return f.Hostname == o.Hostname && f.Arch == o.Arch && f.CPUModel == o.CPUModel &&
		(f.MachineID == "" || o.MachineID == "" || f.MachineID == o.MachineID)
}
