package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CPUInfo is what the fingerprint takes from /proc/cpuinfo.
type CPUInfo struct {
	Model      string
	Microcode  string
	Hypervisor bool // the "hypervisor" CPU flag: we run inside a VM
}

// ParseCPUInfo reads the first processor's block of /proc/cpuinfo; the
// fingerprint describes one CPU model, and mixed-model hosts are not a
// case vfleet compares across.
func ParseCPUInfo(r io.Reader) (CPUInfo, error) {
	var ci CPUInfo
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		seen = true
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "model name":
			ci.Model = val
		case "microcode":
			ci.Microcode = val
		case "flags":
			for _, f := range strings.Fields(val) {
				if f == "hypervisor" {
					ci.Hypervisor = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return ci, err
	}
	if !seen {
		return ci, errors.New("no processor entries")
	}
	return ci, nil
}

// ParseMemTotal returns MemTotal from /proc/meminfo, in KiB.
func ParseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "MemTotal" {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed MemTotal line %q", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal: %w", err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemTotal line")
}

// ParseCPUListCount counts the CPUs in a kernel cpu list such as the
// content of /sys/devices/system/cpu/online ("0-3,6,8-9").
func ParseCPUListCount(r io.Reader) (int, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	cpus, err := ParseCPUList(string(b))
	return len(cpus), err
}

// ParseCPUList reads a kernel cpu list ("0-3,6,8-9") into its CPUs, in order.
func ParseCPUList(list string) ([]int, error) {
	s := strings.TrimSpace(list)
	if s == "" {
		return nil, errors.New("empty cpu list")
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: descending range %s", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// FormatCPUList writes CPUs as a kernel cpu list, ranges folded: the form
// cpusets, taskset and QEMU's pinning take.
func FormatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
