package density

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/procfs"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: the kernel fixes
// it at 100 in its user ABI, whatever its internal HZ.
const userHZ = 100

// ErrNoProcess says none of the processes asked about exists any more.
var ErrNoProcess = errors.New("no such process")

// ErrFormat says a /proc file did not look the way the kernel writes it.
var ErrFormat = errors.New("unexpected format")

// Usage is the memory of a set of processes, in bytes.
type Usage struct {
	// RSS counts every resident page each process maps, so pages shared
	// between the processes (a binary's text, shared libraries) are
	// counted once per process.
	RSS int64
	// PSS divides each shared page among the processes mapping it: summed
	// over a fleet it is the memory the fleet really holds.
	PSS int64
	// Processes is how many processes were counted.
	Processes int
}

// ProcessTree returns the given processes that still exist, in their order,
// followed by all their descendants, each pid once. A process that exits
// during the walk is left out.
func ProcessTree(pids []int) []int {
	seen := map[int]bool{}
	var tree []int
	for _, pid := range pids {
		if !seen[pid] && exists(pid) {
			seen[pid] = true
			tree = append(tree, pid)
		}
	}
	// tree grows while it is walked: breadth first over every generation.
	for i := 0; i < len(tree); i++ {
		for _, child := range children(tree[i]) {
			if !seen[child] {
				seen[child] = true
				tree = append(tree, child)
			}
		}
	}
	return tree
}

func exists(pid int) bool {
	_, err := os.Stat(procPath(pid, ""))
	return err == nil
}

// children lists the children of every thread of a process: a child
// belongs to the thread that forked it, so the main thread alone would miss
// those of a multi-threaded parent (a Go program's, for one).
func children(pid int) []int {
	tasks, err := os.ReadDir(procPath(pid, "task"))
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(procPath(pid, "task", task.Name(), "children"))
		if err != nil {
			continue // the thread or the process has exited
		}
		pids, err := parseChildren(b)
		if err != nil {
			continue
		}
		out = append(out, pids...)
	}
	return out
}

// Memory sums the RSS and PSS of the processes and all their descendants,
// read from /proc/PID/smaps_rollup. It fails with ErrNoProcess when none of
// them exists.
func Memory(pids []int) (Usage, error) {
	var u Usage
	for _, pid := range ProcessTree(pids) {
		b, err := os.ReadFile(procPath(pid, "smaps_rollup"))
		if gone(err) {
			continue
		}
		if err != nil {
			return Usage{}, fmt.Errorf("memory of process %d: %w", pid, err)
		}
		rss, pss, err := parseSmapsRollup(b)
		if err != nil {
			return Usage{}, fmt.Errorf("memory of process %d: %w", pid, err)
		}
		u.RSS += rss
		u.PSS += pss
		u.Processes++
	}
	if u.Processes == 0 && len(pids) > 0 {
		return Usage{}, fmt.Errorf("memory of processes %v: %w", pids, ErrNoProcess)
	}
	return u, nil
}

// CPUTime sums the user and system CPU time of the processes and all their
// descendants, read from /proc/PID/stat, including each process's cutime
// and cstime: the time of the children it has reaped. Those matter over a
// window: when a descendant exits and is reaped, its time leaves its own
// utime and stime and joins its parent's cutime and cstime, so only with
// them does the sum keep what a short-lived child used. Children reaped
// before the window began are in both ends of it and cancel out. A
// descendant that leaves the tree alive (a daemon adopted by init) takes
// its time along. It fails with ErrNoProcess when none of the processes
// exists.
func CPUTime(pids []int) (time.Duration, error) {
	var ticks uint64
	counted := 0
	for _, pid := range ProcessTree(pids) {
		b, err := os.ReadFile(procPath(pid, "stat"))
		if gone(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
		}
		st, err := procfs.ParseStat(b)
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
		}
		ticks += st.CPUTicks()
		counted++
	}
	if counted == 0 && len(pids) > 0 {
		return 0, fmt.Errorf("cpu time of processes %v: %w", pids, ErrNoProcess)
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

func procPath(pid int, elem ...string) string {
	return filepath.Join(append([]string{"/proc", strconv.Itoa(pid)}, elem...)...)
}

// gone says a /proc read failed because the process has exited: its
// directory is gone, or (ESRCH) it is a zombie or exiting. Kernel threads
// answer ESRCH too; they have no memory of their own to count.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// parseChildren parses /proc/PID/task/TID/children: pids separated by
// spaces.
func parseChildren(b []byte) ([]int, error) {
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("children %q: %w", f, ErrFormat)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// parseSmapsRollup returns the Rss and Pss lines of /proc/PID/smaps_rollup
// in bytes.
func parseSmapsRollup(b []byte) (rss, pss int64, err error) {
	var haveRSS, havePSS bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "Rss":
			dst, haveRSS = &rss, true
		case "Pss":
			dst, havePSS = &pss, true
		default:
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("smaps_rollup %s %q: %w", key, strings.TrimSpace(value), ErrFormat)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, 0, fmt.Errorf("smaps_rollup %s %q: %w", key, f[0], ErrFormat)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if !haveRSS || !havePSS {
		return 0, 0, fmt.Errorf("smaps_rollup without Rss and Pss lines: %w", ErrFormat)
	}
	return rss, pss, nil
}
