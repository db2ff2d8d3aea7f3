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
	// Shared and Private split RSS: pages another process maps too (the
	// binary, libraries, a clone's template pages, KSM's merged pages) and
	// pages this process alone maps.
	Shared, Private int64
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
		m, err := parseSmaps(b)
		if err != nil {
			return Usage{}, fmt.Errorf("memory of process %d: %w", pid, err)
		}
		if len(m) != 1 {
			return Usage{}, fmt.Errorf("memory of process %d: smaps_rollup of %d areas: %w", pid, len(m), ErrFormat)
		}
		u.add(m[0].Usage)
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
	return time.Duration(ticks) * (time.Second / procfs.UserHZ), nil
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

func (u *Usage) add(o Usage) {
	u.RSS += o.RSS
	u.PSS += o.PSS
	u.Shared += o.Shared
	u.Private += o.Private
}

// RegionMemory is the memory of one process's mappings of exactly size
// bytes: a VM's guest RAM, which QEMU maps in one piece of the guest's
// size (anonymous after a boot, the template's file in a clone). Nothing
// else QEMU maps has a guest RAM's size: TCG's translation cache is a
// page short of its size, or far smaller than any RAM a VM takes.
func RegionMemory(pid int, size int64) (Usage, error) {
	b, err := os.ReadFile(procPath(pid, "smaps"))
	if gone(err) {
		return Usage{}, fmt.Errorf("memory of process %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return Usage{}, err
	}
	areas, err := parseSmaps(b)
	if err != nil {
		return Usage{}, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	return sizedLike(areas, size), nil
}

// sizedLike sums the areas of exactly size bytes.
func sizedLike(areas []area, size int64) Usage {
	var u Usage
	for _, a := range areas {
		if a.Size == size {
			u.add(a.Usage)
		}
	}
	return u
}

// area is one mapping of /proc/PID/smaps, or the one line of
// smaps_rollup, which has the same fields.
type area struct {
	Size int64
	Usage
}

// smapsFields are the fields read of each area, in bytes.
var smapsFields = map[string]func(a *area) *int64{
	"Size":          func(a *area) *int64 { return &a.Size },
	"Rss":           func(a *area) *int64 { return &a.RSS },
	"Pss":           func(a *area) *int64 { return &a.PSS },
	"Shared_Clean":  func(a *area) *int64 { return &a.Shared },
	"Shared_Dirty":  func(a *area) *int64 { return &a.Shared },
	"Private_Clean": func(a *area) *int64 { return &a.Private },
	"Private_Dirty": func(a *area) *int64 { return &a.Private },
}

// parseSmaps parses /proc/PID/smaps or smaps_rollup: each area's header
// line (its address range; the rollup's has no Size line, so its size is
// taken from the range) and then its "Field: N kB" lines.
func parseSmaps(b []byte) ([]area, error) {
	var areas []area
	var haveRSS, havePSS bool
	checkLast := func() error {
		if len(areas) > 0 && (!haveRSS || !havePSS) {
			return fmt.Errorf("smaps area without Rss and Pss lines: %w", ErrFormat)
		}
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.Contains(key, " ") {
			// A header: "start-end perms offset dev inode [path]".
			if err := checkLast(); err != nil {
				return nil, err
			}
			lo, hi, ok := strings.Cut(strings.Fields(line + " x")[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end < start {
				return nil, fmt.Errorf("smaps header %q: %w", line, ErrFormat)
			}
			areas = append(areas, area{Size: int64(end - start)})
			haveRSS, havePSS = false, false
			continue
		}
		field, known := smapsFields[key]
		if !known {
			continue
		}
		if len(areas) == 0 {
			// smaps_rollup as some tests and old kernels give it: no header.
			areas = append(areas, area{})
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return nil, fmt.Errorf("smaps %s %q: %w", key, strings.TrimSpace(value), ErrFormat)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return nil, fmt.Errorf("smaps %s %q: %w", key, f[0], ErrFormat)
		}
		a := &areas[len(areas)-1]
		dst := field(a)
		if key == "Size" {
			*dst = kb << 10
		} else {
			*dst += kb << 10
		}
		haveRSS = haveRSS || key == "Rss"
		havePSS = havePSS || key == "Pss"
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(areas) == 0 {
		return nil, fmt.Errorf("smaps without Rss and Pss lines: %w", ErrFormat)
	}
	return areas, checkLast()
}
