package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/vfleet/vfleet/internal/procfs"
	"go.yaml.in/yaml/v3"
)

// Host is what the machine a scenario runs on has. A CPU list naming a
// CPU it lacks, or a memory size above its own, would do nothing (an
// interrupt affinity the kernel cannot apply) or fail only once guests
// start, so the scenario is refused at its line instead.
type Host struct {
	CPUs        []int // online CPUs, in order
	MemoryBytes int64
}

// ThisHost reads the online CPUs and the memory of the machine vfleet runs on.
func ThisHost() (Host, error) { return HostAt("/proc", "/sys") }

// HostAt reads the online CPUs and the memory under procRoot and sysRoot:
// /proc and /sys, or a fixture tree in tests.
func HostAt(procRoot, sysRoot string) (Host, error) {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices", "system", "cpu", "online"))
	if err != nil {
		return Host{}, fmt.Errorf("online cpus: %w", err)
	}
	cpus, err := procfs.ParseCPUList(string(b))
	if err != nil {
		return Host{}, fmt.Errorf("online cpus: %w", err)
	}
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return Host{}, fmt.Errorf("host memory: %w", err)
	}
	defer f.Close()
	kib, err := procfs.ParseMemTotal(f)
	if err != nil {
		return Host{}, fmt.Errorf("host memory: %w", err)
	}
	return Host{CPUs: cpus, MemoryBytes: kib << 10}, nil
}

// host is what the scenario is checked against: Options.Host, else this
// machine, read once and only when a scenario asks for CPUs or memory;
// none when it runs elsewhere.
func (p *parser) host(n *yaml.Node, path string) (Host, bool) {
	if p.opts.Elsewhere {
		return Host{}, false
	}
	if p.opts.Host != nil {
		return *p.opts.Host, true
	}
	if p.thisHost == nil {
		h, err := ThisHost()
		if err != nil {
			p.errorf(n, path, "cannot check it against this host: %v", err)
			return Host{}, false
		}
		p.thisHost = &h
	}
	return *p.thisHost, true
}

// cpuSet reads a cpu list the host has.
func (p *parser) cpuSet(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if s, ok := p.scalar(n, path); ok {
			p.cpuList(n, path, s)
			*dst = s
		}
	}
}

// cpuList refuses a cpu list of the wrong syntax, or naming a CPU the host
// does not have.
func (p *parser) cpuList(n *yaml.Node, path, list string) {
	if err := checkCPUSet(list); err != nil {
		p.errorf(n, path, "%q is not allowed: %v", list, err)
		return
	}
	cpus, err := procfs.ParseCPUList(list)
	if err != nil {
		return // checkCPUSet takes no list this cannot read
	}
	h, ok := p.host(n, path)
	if !ok {
		return
	}
	for _, c := range cpus {
		if !slices.Contains(h.CPUs, c) {
			p.errorf(n, path, "%q is not allowed: this host has no CPU %d (its CPUs: %s)", list, c, procfs.FormatCPUList(h.CPUs))
			return
		}
	}
}

// memoryOnHost refuses a memory size above the host's.
func (p *parser) memoryOnHost(n *yaml.Node, path, size string, bytes int64) {
	h, ok := p.host(n, path)
	if ok && bytes > h.MemoryBytes {
		p.errorf(n, path, "%q is not allowed: want at most this host's memory, %s", size, formatMiB(h.MemoryBytes))
	}
}

// formatMiB writes a size in whole MiB, a unit memory takes.
func formatMiB(bytes int64) string { return fmt.Sprintf("%dMiB", bytes>>20) }
