package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUsage says a cgroup's CPU accounting file did not look the way the
// kernel writes it.
var ErrUsage = errors.New("unexpected cgroup CPU accounting")

// ParseCPUAcctUsage parses cgroup v1's cpuacct.usage: the CPU time of the
// cgroup's tasks in nanoseconds, as one integer; in seconds.
func ParseCPUAcctUsage(b []byte) (float64, error) {
	ns, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpuacct.usage %q: %w", short(b), ErrUsage)
	}
	return float64(ns) / 1e9, nil
}

// ParseCPUStatV2 takes usage_usec from cgroup v2's cpu.stat ("key value"
// lines), in seconds.
func ParseCPUStatV2(b []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != "usage_usec" {
			continue
		}
		us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu.stat usage_usec %q: %w", v, ErrUsage)
		}
		return float64(us) / 1e6, nil
	}
	return 0, fmt.Errorf("cpu.stat has no usage_usec: %w", ErrUsage)
}

// CPUUsage is the CPU time, in seconds, of every task that ran in
// cgroupPath and below it, read from each hierarchy of mounts that
// accounts CPU time (v2's cpu.stat, v1's cpuacct) and holds the cgroup:
// the most any of them counted, since a process may have been put in
// some hierarchies only (on a hybrid host vfleet's own go in v2 and the
// freezer, a runtime's in every one). A cgroup no hierarchy holds has
// used nothing: nothing was started in it.
func CPUUsage(mounts []Mount, cgroupPath string) (seconds float64, err error) {
	rel := filepath.Clean("/" + cgroupPath)
	for _, m := range mounts {
		file, parse := "cpu.stat", ParseCPUStatV2
		switch {
		case m.V2:
		case m.CPUAcct:
			file, parse = "cpuacct.usage", ParseCPUAcctUsage
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.Dir, rel, file))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		v, err := parse(b)
		if err != nil {
			return 0, err
		}
		seconds = max(seconds, v)
	}
	return seconds, nil
}

func short(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
