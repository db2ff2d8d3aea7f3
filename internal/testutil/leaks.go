package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/procfs"
)

// Snapshot is what a test could leak, taken before it runs.
type Snapshot struct {
	mounts    map[string]bool
	runc      map[string]bool
	cgroups   map[string]bool
	processes map[string]bool
	netns     map[string]bool
	links     map[string]bool
}

// TakeSnapshot records the current state.
func TakeSnapshot(t testing.TB) Snapshot {
	t.Helper()
	return Snapshot{mounts: mounts(t), runc: runcContainers(), cgroups: vfleetCgroups(), processes: processes(),
		netns: netns(), links: rootLinks()}
}

// CheckLeaks fails the test for everything that exists now but did not at
// the snapshot. Processes get a moment to be reaped.
func CheckLeaks(t testing.TB, before Snapshot) {
	t.Helper()
	if leaks := Leaks(t, before); len(leaks) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(leaks, "\n  "))
	}
}

// Leaks lists, sorted, what exists now but did not at the snapshot, each
// entry starting with its kind ("mount", "process", ...), after giving
// processes a moment to exit and be reaped.
func Leaks(t testing.TB, before Snapshot) []string {
	t.Helper()
	var leaks []string
	deadline := time.Now().Add(3 * time.Second)
	for {
		leaks = leaks[:0]
		leaks = append(leaks, added("mount", before.mounts, mounts(t))...)
		leaks = append(leaks, added("runc container", before.runc, runcContainers())...)
		leaks = append(leaks, added("cgroup", before.cgroups, vfleetCgroups())...)
		leaks = append(leaks, added("network namespace", before.netns, netns())...)
		leaks = append(leaks, added("link", before.links, rootLinks())...)
		leaks = append(leaks, added("process", before.processes, processes())...)
		if len(leaks) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(leaks)
	return leaks
}

func added(what string, before, now map[string]bool) []string {
	var out []string
	for k := range now {
		if !before[k] {
			out = append(out, what+" "+k)
		}
	}
	return out
}

// MountPoints lists the mount points in a mountinfo text.
func MountPoints(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		out = append(out, strings.ReplaceAll(f[4], `\040`, " "))
	}
	return out, sc.Err()
}

func mounts(t testing.TB) map[string]bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	points, err := MountPoints(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range points {
		out[p] = true
	}
	return out
}

func runcContainers() map[string]bool {
	out := map[string]bool{}
	b, err := exec.Command("runc", "list", "-q").Output()
	if err != nil {
		return out
	}
	for _, id := range strings.Fields(string(b)) {
		out[id] = true
	}
	return out
}

// vfleetCgroups lists cgroup directories below any hierarchy's /vfleet.
func vfleetCgroups() map[string]bool {
	out := map[string]bool{}
	for _, pattern := range []string{"/sys/fs/cgroup/*/vfleet/*", "/sys/fs/cgroup/*/vfleet/*/*", "/sys/fs/cgroup/vfleet/*", "/sys/fs/cgroup/vfleet/*/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				out[m] = true
			}
		}
	}
	return out
}

func netns() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// vfleetPrograms are the command names (as /proc/PID/comm cuts them, at 15
// bytes) of what vfleet starts. A killed vfleet's processes are adopted by
// init, so a leak is not always a child of the test; a process of another
// vfleet still running (a developer's run beside the tests) has its own
// parent and is not counted.
var vfleetPrograms = map[string]bool{
	"vfleet": true, "vfleet-agent": true, "runc": true, "runc:[2:INIT]": true, "qemu-system-x86": true, "qemu-system-aar": true,
	"stress-ng": true, "sysbench": true, "fio": true, "iperf3": true, "sockperf": true, "cyclictest": true,
	"ovs-vswitchd": true, "ovsdb-server": true,
}

// processes lists the running (not zombie) processes that are this
// process's children, or orphans adopted by init that run one of vfleet's
// programs, as "PID (comm)".
func processes() map[string]bool {
	out := map[string]bool{}
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || !st.Running() {
			continue
		}
		name := comm(pid)
		if st.PPID == self || st.PPID == 1 && vfleetPrograms[name] {
			out[fmt.Sprintf("%d (%s)", pid, name)] = true
		}
	}
	return out
}

// rootLinks lists the network links of this process's namespace.
func rootLinks() map[string]bool {
	out := map[string]bool{}
	links, err := netlink.LinkList()
	if err != nil {
		return out
	}
	for _, l := range links {
		out[l.Attrs().Name] = true
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
