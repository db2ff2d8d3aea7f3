package qemu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/procfs"
	"golang.org/x/sys/unix"
)

// pinPlan maps vCPU i to the i-th CPU of the list; the list must name a
// CPU for every vCPU.
func pinPlan(list string, vcpus int) ([]int, error) {
	cpus, err := procfs.ParseCPUList(list)
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
