// Package cgroup keeps every process a run starts in a cgroup of the run,
// below /vfleet/RUN/, so that nothing a guest starts — a daemon that forks
// twice and leaves its session included — outlives the run: stopping the
// guest, `vfleet fleet down` and `vfleet clean` kill every process in the
// cgroup, then remove it. A container's runtime makes its cgroup itself;
// the host baseline's agent, the peer's and QEMU are started in one made
// here. Both cgroup v1 and v2 are handled, and the hybrid layout of both.
package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Kind is the ledger entry of a cgroup; ID is its path, the same below
// every mounted hierarchy. Its undo kills what runs in it and removes it.
const Kind = "cgroup"

// Parent is where every vfleet cgroup lives.
const Parent = "/vfleet"

func init() { ledger.RegisterUndo(Kind, undo) }

// ErrNoHierarchy says the host mounts neither a cgroup v2 hierarchy nor the
// v1 freezer, the hierarchies processes are contained with.
var ErrNoHierarchy = errors.New("no cgroup v2 hierarchy and no v1 freezer is mounted")

// PathOf is the cgroup path of one guest (or the peer, or a VM template)
// of a run.
func PathOf(run, name string) string { return path.Join(Parent, run, name) }

// Mount is one mounted cgroup hierarchy.
type Mount struct {
	Dir string
	V2  bool
	// Freezer says the v1 hierarchy carries the freezer controller,
	// CPUAcct the cpuacct controller.
	Freezer, CPUAcct bool
}

// Mounts lists the cgroup hierarchies (v1 and v2) in this process's mount
// table, read under procRoot (/proc, or a fixture tree in tests).
func Mounts(procRoot string) ([]Mount, error) {
	all, err := procfs.Mounts(procRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	var out []Mount
	// A hierarchy mounted again further on (a run's host guest binds
	// /sys/fs/cgroup into its root) is the same hierarchy, there only while
	// that run lasts: another run beside it must use the host's own mount,
	// which the table lists first.
	seen := map[string]bool{}
	for _, m := range all {
		h := hierarchy(m)
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		switch m.FSType {
		case "cgroup2":
			out = append(out, Mount{Dir: m.Point, V2: true})
		case "cgroup":
			_, freezer := m.Super["freezer"]
			_, cpuacct := m.Super["cpuacct"]
			out = append(out, Mount{Dir: m.Point, Freezer: freezer, CPUAcct: cpuacct})
		}
	}
	return out, nil
}

// hierarchy names the cgroup hierarchy a mount shows, "" for another file
// system: its superblock's options, which list a v1 hierarchy's
// controllers or name, and the one v2 hierarchy's flags.
func hierarchy(m procfs.Mount) string {
	if m.FSType != "cgroup" && m.FSType != "cgroup2" {
		return ""
	}
	var opts []string
	for k, v := range m.Super {
		opts = append(opts, k+"="+v)
	}
	slices.Sort(opts)
	return m.FSType + " " + strings.Join(opts, ",")
}

func hostMounts() ([]Mount, error) { return Mounts("/proc") }

// holders are the hierarchies a contained process is put in: the v2
// hierarchy, whose cgroup.kill ends every process at once, and the v1
// freezer, which stops them forking while they are killed one by one.
// Neither limits anything, so the host baseline still runs without limits
// and keeps its real-time scheduling (a new cgroup of v1's cpu controller
// would have no real-time budget).
func holders(mounts []Mount) []Mount {
	var out []Mount
	for _, m := range mounts {
		if m.V2 || m.Freezer {
			out = append(out, m)
		}
	}
	return out
}

// Group is a cgroup made to contain a guest's processes.
type Group struct {
	Path string
	dirs []Mount // the group's directory below each holding hierarchy
}

// Create makes the cgroup at cgroupPath below the holding hierarchies.
// The caller records it in the ledger first (synced, before it exists, so
// that `vfleet clean` finds it after a crash) and releases that entry when
// the guest stops.
func Create(cgroupPath string) (*Group, error) {
	mounts, err := hostMounts()
	if err != nil {
		return nil, err
	}
	hold := holders(mounts)
	if len(hold) == 0 {
		return nil, ErrNoHierarchy
	}
	g := &Group{Path: cgroupPath}
	for _, m := range hold {
		dir := filepath.Join(m.Dir, cgroupPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		g.dirs = append(g.dirs, Mount{Dir: dir, V2: m.V2, Freezer: m.Freezer})
	}
	return g, nil
}

// Start starts cmd through start (which calls cmd.Start, perhaps from a
// thread in another namespace) inside the group. Under v2 the kernel forks
// it straight into the group (CLONE_INTO_CGROUP); a v1 hierarchy gets its
// pid right after, before anything has been asked of it: the process is
// an agent or QEMU, which start nothing until told to. Started but not
// contained, it is killed and waited for.
func (g *Group) Start(cmd *exec.Cmd, start func() error) error {
	for _, d := range g.dirs {
		if !d.V2 {
			continue
		}
		fd, err := unix.Open(d.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup: %w", err)
		}
		defer unix.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	if err := start(); err != nil {
		return err
	}
	for _, d := range g.dirs {
		if d.V2 {
			continue
		}
		if err := writeFile(filepath.Join(d.Dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("put pid %d in cgroup %s: %w", cmd.Process.Pid, g.Path, err)
		}
	}
	return nil
}

func writeFile(name, value string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value)
	return errors.Join(werr, f.Close())
}

func undo(ctx context.Context, e ledger.Entry) error {
	if err := Kill(ctx, e.ID); err != nil {
		return err
	}
	return Remove(e.ID)
}

// killPause is how long Kill lets killed processes exit before it looks
// again.
const killPause = 10 * time.Millisecond

// Kill kills every process in the cgroup at cgroupPath, in every
// hierarchy, and returns once none is left or ctx ends. Under v2 one write
// to cgroup.kill does it. The v1 hierarchies hold the same processes: when
// v2 has killed them there, the v1 groups are only looked at (and what is
// listed sent SIGKILL again) until the exiting processes have left. Only
// without v2 does the freezer, where mounted, stop the group while each
// listed process is sent SIGKILL, so that none forks a new one unseen.
func Kill(ctx context.Context, cgroupPath string) error {
	mounts, err := hostMounts()
	if err != nil {
		return err
	}
	var v1 []Mount
	killedByV2 := false
	for _, m := range mounts {
		dir := filepath.Join(m.Dir, cgroupPath)
		if !exists(dir) {
			continue
		}
		if !m.V2 {
			v1 = append(v1, Mount{Dir: dir, Freezer: m.Freezer})
			continue
		}
		if err := drain(ctx, dir, true, ""); err != nil {
			return fmt.Errorf("kill cgroup %s: %w", dir, err)
		}
		killedByV2 = true
	}
	freezer := ""
	for _, m := range v1 {
		if m.Freezer && !killedByV2 {
			freezer = m.Dir
		}
	}
	for _, m := range v1 {
		if err := drain(ctx, m.Dir, false, freezer); err != nil {
			return fmt.Errorf("kill cgroup %s: %w", m.Dir, err)
		}
	}
	return nil
}

func drain(ctx context.Context, dir string, v2 bool, freezer string) error {
	for {
		pids, err := Procs(dir)
		if err != nil || len(pids) == 0 {
			return err
		}
		// Under v2 one write kills every process, and any being forked;
		// a kernel before 5.14 lacks the file.
		if !v2 || writeFile(filepath.Join(dir, "cgroup.kill"), "1") != nil {
			if err := killEach(ctx, dir, freezer); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w, still in it: %s", ctx.Err(), describe(pids))
		case <-time.After(killPause):
		}
	}
}

// describe names processes with their state (R, S, D, T, Z…) for an error
// that says why a group would not empty.
func describe(pids []int) string {
	var out []string
	for _, pid := range pids[:min(len(pids), 8)] {
		state := "gone"
		if st, err := procfs.ReadStat(pid); err == nil {
			state = string(st.State)
		}
		out = append(out, fmt.Sprintf("%d (%s)", pid, state))
	}
	if len(pids) > 8 {
		out = append(out, fmt.Sprintf("and %d more", len(pids)-8))
	}
	return strings.Join(out, ", ")
}

// killEach sends SIGKILL to each process listed in dir while the group is
// frozen; killed while frozen, they die as they thaw, without forking.
func killEach(ctx context.Context, dir, freezer string) error {
	thaw := freeze(ctx, freezer)
	defer thaw()
	pids, err := Procs(dir)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return nil
}

// freezeWait bounds the wait for a v1 group to be frozen; one not frozen
// by then is killed as it is, and looked at again.
const freezeWait = time.Second

// freeze freezes the v1 freezer cgroup dir, when there is one, and returns
// its thaw.
func freeze(ctx context.Context, dir string) (thaw func()) {
	if dir == "" {
		return func() {}
	}
	state := filepath.Join(dir, "freezer.state")
	thaw = func() { _ = writeFile(state, "THAWED") }
	if writeFile(state, "FROZEN") != nil {
		return thaw
	}
	deadline := time.Now().Add(freezeWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile(state); err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return thaw
}

// Procs lists the processes in the cgroup directory dir.
func Procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// ProcsBelow lists the processes in the cgroup at cgroupPath and in every
// cgroup below it, in any hierarchy, each with the path of its cgroup.
func ProcsBelow(cgroupPath string) (map[int]string, error) {
	mounts, err := hostMounts()
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, m := range mounts {
		top := filepath.Join(m.Dir, cgroupPath)
		err := filepath.WalkDir(top, func(dir string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // a cgroup removed meanwhile
			}
			pids, err := Procs(dir)
			if err != nil {
				return nil
			}
			for _, pid := range pids {
				out[pid] = "/" + strings.TrimPrefix(dir, m.Dir+"/")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Remove removes the cgroup at cgroupPath in every hierarchy, then its
// parents below Parent when they are empty. Parent stays: another run may
// be making its cgroups there at that moment, and its mkdir of its own
// directory fails if Parent goes between that and its mkdir of Parent.
func Remove(cgroupPath string) error {
	mounts, err := hostMounts()
	if err != nil {
		return err
	}
	leaf := path.Clean(cgroupPath)
	var errs []error
	for _, m := range mounts {
		for p := leaf; p != "/" && p != "." && p != Parent; p = path.Dir(p) {
			err := rmdirCgroup(filepath.Join(m.Dir, p), p == leaf)
			if err == nil || errors.Is(err, unix.ENOENT) {
				continue
			}
			if p != leaf && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY)) {
				break // a parent still shared with another run's cgroups
			}
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", filepath.Join(m.Dir, p), err))
			break
		}
	}
	return errors.Join(errs...)
}

// busyWait bounds how long removing a cgroup waits for its last task to be
// gone: a container killed while starting (Ctrl-C during a launch) leaves
// the runtime's init dying in it for a moment, and the cgroup refuses
// removal (EBUSY) until the kernel has reaped it.
const busyWait = 3 * time.Second

func rmdirCgroup(dir string, leaf bool) error {
	deadline := time.Now().Add(busyWait)
	for {
		err := unix.Rmdir(dir)
		if !leaf || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
