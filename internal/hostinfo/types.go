package hostinfo

// Fingerprint identifies the host a run was measured on. Two runs are only
// comparable when their fingerprints agree on what matters (CPU, kernel,
// microcode), so every run stores one.
type Fingerprint struct {
	Hostname     string            `json:"hostname"`
	Kernel       string            `json:"kernel"` // uname -r
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
// machine rather than to one run (a scenario's baseline). The fingerprint
// records no machine-id, so it is the host name, which is also what a
// user recognises; a run imported from another machine keeps its own.
func (f Fingerprint) Machine() string { return f.Hostname }
