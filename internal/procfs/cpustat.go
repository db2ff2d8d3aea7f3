package procfs

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

// ErrCPUStat is returned for a /proc/stat text without a well-formed
// aggregate cpu line and per-CPU lines.
var ErrCPUStat = errors.New("malformed /proc/stat")

// CPUStat sums the aggregate "cpu" line of /proc/stat, in clock ticks
// (USER_HZ).
type CPUStat struct {
	// Busy is every column but idle and iowait (steal included: on a VM,
	// time the hypervisor took is time the measurement did not get).
	Busy, Total uint64
	// Kernel is system, irq and softirq: the kernel's work, whichever
	// task or interrupt it was done for.
	Kernel uint64
	// Tasks is user, nice and system: time the CPUs ran tasks, which a
	// cgroup's usage can be set against; Steal, time a hypervisor gave
	// this machine's CPUs to others.
	Tasks, Steal uint64
	CPUs         int
}

// ParseCPUStat parses a /proc/stat text: this host's, or a guest's with
// a kernel of its own read through its agent.
func ParseCPUStat(b []byte) (CPUStat, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var t CPUStat
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			t.CPUs++
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]:
		// guest time is already inside user, so only the first eight count.
		if len(f) < 9 {
			return CPUStat{}, fmt.Errorf("%w: short cpu line", ErrCPUStat)
		}
		for i := 1; i <= 8; i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return CPUStat{}, fmt.Errorf("%w: cpu column %d %q", ErrCPUStat, i, f[i])
			}
			t.Total += v
			if i != 4 && i != 5 {
				t.Busy += v
			}
			if i == 3 || i == 6 || i == 7 {
				t.Kernel += v
			}
			if i <= 3 {
				t.Tasks += v
			}
			if i == 8 {
				t.Steal = v
			}
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return CPUStat{}, err
	}
	if !found || t.CPUs == 0 {
		return CPUStat{}, fmt.Errorf("%w: no cpu lines", ErrCPUStat)
	}
	return t, nil
}

// ReadCPUStat reads and parses procRoot/stat: procRoot is /proc, or a
// fixture tree in tests.
func ReadCPUStat(procRoot string) (CPUStat, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return CPUStat{}, err
	}
	return ParseCPUStat(b)
}
