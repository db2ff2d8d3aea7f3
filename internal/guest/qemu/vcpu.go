package qemu

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseCPUList expands a cpuset list ("0-2,5") into CPU numbers, in the
// order written.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad cpu %q in %q", lo, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad cpu range %q in %q", part, s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// pinPlan maps vCPU i to the i-th CPU of the list; the list must name a
// CPU for every vCPU.
func pinPlan(list string, vcpus int) ([]int, error) {
	cpus, err := ParseCPUList(list)
	if err != nil {
		return nil, err
	}
	if len(cpus) < vcpus {
		return nil, fmt.Errorf("pin_vcpus %q names %d CPUs for %d vCPUs: give one host CPU per vCPU", list, len(cpus), vcpus)
	}
	return cpus[:vcpus], nil
}

// pinThreads binds each vCPU thread to its host CPU.
func pinThreads(threads, cpus []int) error {
	for i, tid := range threads {
		var set unix.CPUSet
		set.Set(cpus[i])
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin vCPU %d (thread %d) to CPU %d: %w", i, tid, cpus[i], err)
		}
	}
	return nil
}

// makeRealtime puts the vCPU threads under SCHED_FIFO at prio.
func makeRealtime(threads []int, prio int) error {
	for i, tid := range threads {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			return fmt.Errorf("SCHED_FIFO %d for vCPU %d (thread %d): %w", prio, i, tid, err)
		}
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
