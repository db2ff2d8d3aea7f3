package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Usage is what a guest uses at the moment it is read.
type Usage struct {
	CPUSeconds  float64 // user+system time since the guest started
	MemoryBytes float64
	// HasCPU and HasMemory say which of the two could be read.
	HasCPU, HasMemory bool
	// ReadBytes and WriteBytes are what the guest's processes (and the
	// children they have waited for) made the block layer read and write:
	// /proc/PID/io, which every kind has — the agent of a host guest, a
	// container's init, a VM's QEMU, whose disk is its guest's. HasIO says
	// they could be read.
	ReadBytes, WriteBytes float64
	HasIO                 bool
	// Net is nil when the guest shares the host's network namespace (its
	// counters would be the host's) or has no process to read them from.
	Net []NetDev
}

// NetDev is one interface's counters from /proc/PID/net/dev.
type NetDev struct {
	Interface          string
	RxBytes, RxPackets uint64
	TxBytes, TxPackets uint64
}

// source is where a guest's usage is read from, resolved once when the
// guest has started so a scrape only opens the files it needs.
type source struct {
	cgroup  bool   // read the cgroup's files, else the processes'
	cpuFile string // cpuacct.usage (v1) or cpu.stat (v2)
	cpuV2   bool
	memFile string // memory.usage_in_bytes (v1) or memory.current (v2)
	pids    []int
	procDir string // root/proc
	netDev  string // root/proc/PID/net/dev, empty when not in its own netns
}

// resolveSource finds a guest's files below root ("/" on a live system).
// A cgroup is looked up as v1 first (cpuacct and memory controllers), then
// as v2, which covers v1, hybrid and unified hosts alike.
func resolveSource(root, cgroup string, pids []int) source {
	s := source{procDir: filepath.Join(root, "proc"), pids: pids}
	if cgroup != "" {
		s.cgroup = true
		cg := filepath.Join(root, "sys", "fs", "cgroup")
		rel := filepath.Clean("/" + cgroup)
		switch {
		case exists(filepath.Join(cg, "cpuacct", rel, "cpuacct.usage")):
			s.cpuFile = filepath.Join(cg, "cpuacct", rel, "cpuacct.usage")
		case exists(filepath.Join(cg, rel, "cpu.stat")):
			s.cpuFile, s.cpuV2 = filepath.Join(cg, rel, "cpu.stat"), true
		}
		switch {
		case exists(filepath.Join(cg, "memory", rel, "memory.usage_in_bytes")):
			s.memFile = filepath.Join(cg, "memory", rel, "memory.usage_in_bytes")
		case exists(filepath.Join(cg, rel, "memory.current")):
			s.memFile = filepath.Join(cg, rel, "memory.current")
		}
	}
	if len(pids) > 0 {
		own, err := ownNetNS(s.procDir, pids[0])
		if err == nil && own {
			s.netDev = filepath.Join(s.procDir, strconv.Itoa(pids[0]), "net", "dev")
		}
	}
	return s
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ownNetNS says whether pid lives in another network namespace than this
// process, comparing the namespaces' identities ("net:[4026531840]").
func ownNetNS(procDir string, pid int) (bool, error) {
	theirs, err := os.Readlink(filepath.Join(procDir, strconv.Itoa(pid), "ns", "net"))
	if err != nil {
		return false, err
	}
	ours, err := os.Readlink(filepath.Join(procDir, "self", "ns", "net"))
	if err != nil {
		return false, err
	}
	return theirs != ours, nil
}

// read reads the guest's usage now. A guest whose files are gone (it is
// being stopped) gives an error rather than zeros, so no made-up value
// reaches Prometheus; what could be read is returned with it.
func (s source) read() (Usage, error) {
	var u Usage
	var errs []error
	if s.cgroup {
		if s.cpuFile != "" {
			b, err := os.ReadFile(s.cpuFile)
			if err == nil {
				if s.cpuV2 {
					u.CPUSeconds, err = cgroup.ParseCPUStatV2(b)
				} else {
					u.CPUSeconds, err = cgroup.ParseCPUAcctUsage(b)
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("cpu: %w", err))
			}
			u.HasCPU = err == nil
		}
		// A v2 cgroup without the memory controller has no memory.current:
		// no value then, rather than another kind of number.
		if s.memFile != "" {
			b, err := os.ReadFile(s.memFile)
			if err == nil {
				u.MemoryBytes, err = ParseBytes(b)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("memory: %w", err))
			}
			u.HasMemory = err == nil
		}
	} else {
		if len(s.pids) == 0 {
			return u, errors.New("neither a cgroup nor a process to read")
		}
		u.HasCPU, u.HasMemory = true, true
		for _, pid := range s.pids {
			dir := filepath.Join(s.procDir, strconv.Itoa(pid))
			b, err := os.ReadFile(filepath.Join(dir, "stat"))
			if err == nil {
				var cpu float64
				cpu, err = ParseProcStat(b)
				u.CPUSeconds += cpu
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("process %d: %w", pid, err))
				u.HasCPU = false
			}
			b, err = os.ReadFile(filepath.Join(dir, "status"))
			if err == nil {
				var rss float64
				rss, err = ParseProcStatusRSS(b)
				u.MemoryBytes += rss
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("process %d: %w", pid, err))
				u.HasMemory = false
			}
		}
	}
	if len(s.pids) > 0 {
		u.HasIO = true
		for _, pid := range s.pids {
			b, err := os.ReadFile(filepath.Join(s.procDir, strconv.Itoa(pid), "io"))
			if err == nil {
				var r, w float64
				r, w, err = ParseProcIO(b)
				u.ReadBytes += r
				u.WriteBytes += w
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("process %d: io: %w", pid, err))
				u.HasIO = false
			}
		}
	}
	if s.netDev != "" {
		b, err := os.ReadFile(s.netDev)
		if err == nil {
			u.Net, err = ParseNetDev(b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("network: %w", err))
		}
	}
	return u, errors.Join(errs...)
}

// ParseProcIO returns read_bytes and write_bytes of /proc/PID/io: bytes
// the process caused to be fetched from and sent to storage (page-cache
// hits are not in them; rchar and wchar would count those too).
func ParseProcIO(b []byte) (read, write float64, err error) {
	var haveR, haveW bool
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *float64
		switch key {
		case "read_bytes":
			dst, haveR = &read, true
		case "write_bytes":
			dst, haveW = &write, true
		default:
			continue
		}
		v, perr := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("%w: /proc/PID/io %s %q", ErrFormat, key, strings.TrimSpace(value))
		}
		*dst = float64(v)
	}
	if !haveR || !haveW {
		return 0, 0, fmt.Errorf("%w: /proc/PID/io without read_bytes and write_bytes: %q", ErrFormat, short(b))
	}
	return read, write, nil
}

// ErrFormat says a file did not look the way the kernel writes it.
var ErrFormat = errors.New("unexpected format")

// ParseBytes parses a one-integer byte count: v1's memory.usage_in_bytes or
// v2's memory.current.
func ParseBytes(b []byte) (float64, error) {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("byte count %q: %w", short(b), ErrFormat)
	}
	return float64(n), nil
}

// ParseProcStat returns the CPU time of a process and of its children it
// has waited for (utime+stime+cutime+cstime of /proc/PID/stat). Counting
// the children matters for the host baseline, whose agent runs each tool as
// a child: without them the tools' work would not show.
func ParseProcStat(b []byte) (float64, error) {
	st, err := procfs.ParseStat(b)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return float64(st.CPUTicks()) / procfs.UserHZ, nil
}

// ParseProcStatusRSS returns VmRSS of /proc/PID/status in bytes. A kernel
// thread or a zombie has no VmRSS line and uses no memory of its own.
func ParseProcStatusRSS(b []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status VmRSS %q: %w", v, ErrFormat)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status VmRSS %q: %w", v, ErrFormat)
		}
		return float64(kb) * 1024, nil
	}
	return 0, nil
}

// ParseNetDev parses /proc/PID/net/dev, leaving out loopback, whose traffic
// never leaves the guest.
func ParseNetDev(b []byte) ([]NetDev, error) {
	var out []NetDev
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 0; sc.Scan(); line++ {
		if line < 2 { // two header lines
			continue
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("net/dev line %d %q: %w", line+1, sc.Text(), ErrFormat)
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev %s: %d counters, want 16: %w", name, len(f), ErrFormat)
		}
		if name == "lo" {
			continue
		}
		var n [4]uint64
		for i, col := range []int{0, 1, 8, 9} {
			v, err := strconv.ParseUint(f[col], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev %s counter %q: %w", name, f[col], ErrFormat)
			}
			n[i] = v
		}
		out = append(out, NetDev{Interface: name, RxBytes: n[0], RxPackets: n[1], TxBytes: n[2], TxPackets: n[3]})
	}
	return out, sc.Err()
}

func short(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
