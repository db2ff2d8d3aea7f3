package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Snapshot is what a test could leak, taken before it runs.
type Snapshot struct {
	mounts    map[string]bool
	kinds     map[string]bool // what the kinds compiled in report of their own state
	cgroups   map[string]bool
	runs      map[string]bool // the run cgroups (/vfleet/RUN) that exist already
	processes map[string]bool
	netns     map[string]bool
	links     map[string]bool
	// shared: the test shares the machine (SharesMachine), and its check
	// counts what carries one of its scope's names.
	shared bool
}

// TakeSnapshot records the current state.
func TakeSnapshot(t testing.TB) Snapshot {
	t.Helper()
	// What another test process's integration test makes meanwhile is not
	// this test's leak.
	holdMachine(t)
	cgroups := vfleetCgroups()
	runs := map[string]bool{}
	for dir := range cgroups {
		runs[runOf(dir)] = true
	}
	return Snapshot{mounts: mounts(t), kinds: kindLeftovers(), cgroups: cgroups, runs: runs, processes: processes(runs),
		netns: netns(), links: rootLinks(), shared: sharesMachine(t)}
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
		leaks = append(leaks, added("", before.kinds, kindLeftovers())...)
		leaks = append(leaks, added("cgroup", before.cgroups, vfleetCgroups())...)
		leaks = append(leaks, added("network namespace", before.netns, netns())...)
		leaks = append(leaks, added("link", before.links, rootLinks())...)
		leaks = append(leaks, added("process", before.processes, processes(before.runs))...)
		if before.shared {
			leaks = ownLeaks(t, leaks)
		}
		if len(leaks) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(leaks)
	return leaks
}

// ownLeaks keeps, of what a test that shares the machine finds added, what
// is its own: what carries a name of its scope, and its own children.
func ownLeaks(t testing.TB, leaks []string) []string {
	t.Helper()
	names := scopeNames(topLevel(t))
	if len(names) == 0 {
		t.Fatal("a test that shares the machine names what it makes (ScopeLeaks, RunID or Ledger) for its leak check to count")
	}
	// This process's children are the test's own unless another test of
	// the process runs in parallel, whose children they may be.
	children := onlyTurn(topLevel(t))
	self := os.Getpid()
	var own []string
	for _, l := range leaks {
		if children && ownProcess(l, self) || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(l, n) }) {
			own = append(own, l)
		}
	}
	return own
}

// ownProcess is whether a leak is a process (not in a guest's cgroup) whose
// parent is this test process.
func ownProcess(leak string, self int) bool {
	var pid int
	if _, err := fmt.Sscanf(leak, "process %d", &pid); err != nil || strings.Contains(leak, " in cgroup ") {
		return false
	}
	st, err := procfs.ReadStat(pid)
	return err == nil && st.PPID == self
}

// scope holds what each test names as its own, by top-level test: a name
// a subtest adds counts for its parent's check too. Names are unique
// (run keys, RunID), so they are kept until the process ends.
var scope struct {
	sync.Mutex
	lists map[string][]func() []string
}

// ScopeLeaks adds to what the test's leak check counts as its own whatever
// carries one of the names list returns when the check runs (the keys of
// the runs in a database of its own, say): a test that shares the machine
// counts nothing else.
func ScopeLeaks(t testing.TB, list func() []string) {
	scope.Lock()
	defer scope.Unlock()
	if scope.lists == nil {
		scope.lists = map[string][]func() []string{}
	}
	test := topLevel(t)
	scope.lists[test] = append(scope.lists[test], list)
}

func scopeNames(test string) []string {
	scope.Lock()
	lists := slices.Clone(scope.lists[test])
	scope.Unlock()
	var names []string
	for _, l := range lists {
		for _, n := range l() {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// onlyTurn is whether test is the only test of this process that holds
// the machine.
func onlyTurn(test string) bool {
	machine.Lock()
	defer machine.Unlock()
	_, ok := machine.turns[test]
	return len(machine.turns) == 1 && ok
}

// sharesMachine is whether t's test shares the machine.
func sharesMachine(t testing.TB) bool {
	machine.Lock()
	defer machine.Unlock()
	return machine.sharing[topLevel(t)]
}

var runIDs atomic.Int64

// RunID is a guest.Env RunID of the test's own: no other test process's,
// and in the test's scope (ScopeLeaks), since a guest's cgroups, container
// and domain names carry it.
func RunID(t testing.TB) string {
	// Letters at both ends: no id is part of another.
	id := fmt.Sprintf("t%dn%dt", os.Getpid(), runIDs.Add(1))
	ScopeLeaks(t, func() []string { return []string{id} })
	return id
}

func added(what string, before, now map[string]bool) []string {
	var out []string
	for k := range now {
		if !before[k] {
			out = append(out, strings.TrimSpace(what+" "+k))
		}
	}
	return out
}

// MountPoints lists the mount points in this process's mount table, read
// under procRoot.
func MountPoints(procRoot string) ([]string, error) {
	mounts, err := procfs.Mounts(procRoot)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(mounts))
	for i, m := range mounts {
		out[i] = m.Point
	}
	return out, nil
}

func mounts(t testing.TB) map[string]bool {
	points, err := MountPoints("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range points {
		out[p] = true
	}
	return out
}

func kindLeftovers() map[string]bool {
	out := map[string]bool{}
	for _, l := range guest.Leftovers() {
		out[l] = true
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

// outsidePrograms are the command names (as /proc/PID/comm cuts them, at
// 15 bytes) of what vfleet runs outside any guest's cgroup: vfleet itself,
// the ovs path's daemons and the user path's passt (which runs as
// passt.avx2 where the CPU has AVX2). A killed vfleet's processes are adopted by
// init, so such a leak is not always a child of the test; one of another
// vfleet still running (a developer's run beside the tests) has its own
// parent and is not counted. The Kubernetes fixture's programs
// (testutil.Kube), which its script leaves to init, are among them, so
// that a stop that leaves one running is seen.
var outsidePrograms = map[string]bool{"vfleet": true, "ovs-vswitchd": true, "ovsdb-server": true, "passt": true, "passt.avx2": true,
	"containerd": true, "containerd-shim": true, "etcd": true, "kube-apiserver": true, "kube-controller": true, "kube-scheduler": true, "kubelet": true}

// processes lists, as "PID (comm)", the running (not zombie) processes a
// test could leave behind: every process in a cgroup of vfleet's (all a
// guest, the peer or a VM started, however it detached itself) but those
// of the runs in others (runs of another test beside this one), this
// process's children, and orphans adopted by init that run one of
// outsidePrograms.
func processes(others map[string]bool) map[string]bool {
	out := map[string]bool{}
	inCgroups, _ := cgroup.ProcsBelow(cgroup.Parent)
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
		if cg, ok := inCgroups[pid]; ok {
			if !others[runOf(cg)] {
				out[fmt.Sprintf("%d (%s) in cgroup %s", pid, name, cg)] = true
			}
		} else if st.PPID == self || st.PPID == 1 && outsidePrograms[name] {
			out[fmt.Sprintf("%d (%s)", pid, name)] = true
		}
	}
	return out
}

// runOf is the run cgroup (/vfleet/RUN) a cgroup path or directory is, or
// is below.
func runOf(p string) string {
	_, rest, _ := strings.Cut(p, cgroup.Parent+"/")
	run, _, _ := strings.Cut(rest, "/")
	return cgroup.PathOf(run, "")
}

// Outliving returns what list still finds once it finds nothing or after
// a few seconds: a killed process leaves its cgroup a moment before it is
// a zombie, so a check right after a kill can see it still running.
func Outliving[T any](list func() []T) []T {
	deadline := time.Now().Add(3 * time.Second)
	for {
		found := list()
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RunningIn lists, as "PID (comm) in cgroup PATH", the running (not
// zombie) processes in the cgroups of a run (cgroup.PathOf(run, "")).
func RunningIn(t testing.TB, cgroupPath string) []string {
	t.Helper()
	procs, err := cgroup.ProcsBelow(cgroupPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for pid, cg := range procs {
		if st, err := procfs.ReadStat(pid); err == nil && st.Running() {
			out = append(out, fmt.Sprintf("%d (%s) in cgroup %s", pid, comm(pid), cg))
		}
	}
	sort.Strings(out)
	return out
}

// SleepArg is the length of a sleep a test starts and later looks for
// among the machine's processes: seconds, and this test process's pid as
// a fraction, so that it finds no other test's sleep, nor one a killed
// run of its own left.
func SleepArg(seconds int) string { return fmt.Sprintf("%d.%d", seconds, os.Getpid()) }

// RunningWithArgs lists the running (not zombie) processes whose command
// line is exactly argv: a test's distinctive command, looked for wherever
// it went.
func RunningWithArgs(t testing.TB, argv ...string) []int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(b) != want {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.Running() {
			out = append(out, pid)
		}
	}
	return out
}

// rootLinks lists the network links of this process's namespace, each
// with its alias where it has one: a device named by a hash says there
// whose it is.
func rootLinks() map[string]bool {
	out := map[string]bool{}
	links, err := netlink.LinkList()
	if err != nil {
		return out
	}
	for _, l := range links {
		name := l.Attrs().Name
		if a := l.Attrs().Alias; a != "" {
			name += " (" + a + ")"
		}
		out[name] = true
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
