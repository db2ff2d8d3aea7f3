// Package attack tries known ways out of a guest, each as an attacker
// would start it but stopped before it could harm anything: a file that
// could be rewritten is opened for writing and closed, a setting that
// could be changed is written its own value, a process that could be
// traced is seized and let go, a file system that could be mounted is
// mounted read-only without replaying its journal, in a mount namespace
// that dies with the attempt. Each attempt reports what stopped it (the
// step and the kernel's answer) or what it reached; package audit judges
// whether what it reached was the host.
//
// It is linked into the static agent, so it uses nothing but the standard
// library, x/sys and vfleet's parsers of the kernel's files (procfs).
package attack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/procfs"
)

// Outcomes of an attempt.
const (
	Blocked   = "blocked"
	Succeeded = "succeeded"
)

// Names of the attempts, which package audit judges each by.
const (
	ReleaseAgent = "cgroup release_agent"
	CorePattern  = "core_pattern"
	BlockDevice  = "host block device"
	ProcRoot     = "/proc/1/root"
	ProcNS       = "/proc/1/ns/mnt"
	Ptrace       = "ptrace pid 1"
	DevKVM       = "/dev/kvm"
	DevMem       = "/dev/mem"
	Module       = "kernel module"
	ExeOverwrite = "/proc/self/exe overwrite"
	Shocker      = "open_by_handle_at"
	UserNSMount  = "unshare -U, then mount"
)

// Attempt is one technique's result.
type Attempt struct {
	Name      string `json:"name"`
	Technique string `json:"technique"`
	Outcome   string `json:"outcome"`
	// By is, for a blocked attempt, the step and the kernel's answer.
	By string `json:"by,omitempty"`
	// Evidence is, for one that succeeded, what it got.
	Evidence string `json:"evidence,omitempty"`
	// Reached identifies what it got to, for the judge: a file's
	// "major:minor:inode", a device's "major:minor", a namespace's link.
	Reached string `json:"reached,omitempty"`
}

// Arg is the agent's argument that runs the attempts beside the probes:
// `vfleet-agent audit --attack [NAME=ADDR:PORT ...]`.
const Arg = "--attack"

// userNSArg is the agent's argument for the child that starts in a user
// namespace of its own: `vfleet-agent attack-userns DIR`.
const userNSArg = "attack-userns"

// childTimeout bounds the user namespace child, which mounts and reads a
// few files.
const childTimeout = 20 * time.Second

// Run makes every attempt, in dir (a scratch directory of the guest's own,
// where mount points and device nodes are made and removed).
func Run(ctx context.Context, dir string) []Attempt {
	work, err := os.MkdirTemp(dir, ".attack-")
	if err != nil {
		return []Attempt{{Name: "setup", Outcome: Blocked, By: "no scratch directory: " + ErrText(err)}}
	}
	defer os.RemoveAll(work)
	release := inMountNS(work, Attempt{Name: ReleaseAgent, Technique: releaseTechnique}, releaseAgent)
	userns := userNSAttempts(ctx, work)
	if release.Outcome == Blocked && len(userns) == 2 && userns[1].Outcome == Succeeded {
		release = userns[1]
		release.Evidence = "in a user namespace of its own: " + release.Evidence
	} else if release.Outcome == Blocked && len(userns) == 2 {
		release.By += "; in a user namespace of its own: " + userns[1].By
	}
	out := []Attempt{release, corePattern(), blockDevice(work), procRoot(), procNS(), ptracePid1(),
		device(work, DevKVM, 10, 232), device(work, DevMem, 1, 1), module(), exeOverwrite(), shocker(), userns[0]}
	return out
}

// RunChild is the user namespace child's side: it prints its attempts as
// JSON. It is reached through the agent's argument userNSArg.
func RunChild(args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New(userNSArg + ": want the directory to work in")
	}
	return json.NewEncoder(out).Encode(childAttempts(args[0]))
}

// IsChild says whether the agent was started as the user namespace child.
func IsChild(args []string) bool { return len(args) >= 2 && args[1] == userNSArg }

// childAttempts run in a new user, mount and cgroup namespace, where the
// child is root over its own mounts: a tmpfs shows that the new namespace
// lets it mount, and the cgroup attempt is CVE-2022-0492's way.
func childAttempts(dir string) []Attempt {
	mount := Attempt{Name: UserNSMount, Technique: "unshare(CLONE_NEWUSER|CLONE_NEWNS), then mount a tmpfs"}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return []Attempt{blocked(mount, "make / private", err)}
	}
	mnt, err := os.MkdirTemp(dir, "tmpfs-")
	if err != nil {
		return []Attempt{blocked(mount, "mkdir", err)}
	}
	defer os.Remove(mnt)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
		mount = blocked(mount, "mount -t tmpfs in the new namespaces", err)
	} else {
		unix.Unmount(mnt, unix.MNT_DETACH)
		mount = succeeded(mount, "root of a user namespace of its own mounted a tmpfs: the namespaces' kernel surface is open to it", "")
	}
	cg, err := os.MkdirTemp(dir, "cgroup-")
	if err != nil {
		return []Attempt{mount, blocked(Attempt{Name: ReleaseAgent, Technique: releaseTechnique}, "mkdir", err)}
	}
	defer os.Remove(cg)
	return []Attempt{mount, releaseAgent(cg)}
}

// userNSAttempts start the child in its new namespaces; both of its
// attempts are blocked with the reason when the namespaces cannot be had.
func userNSAttempts(ctx context.Context, dir string) []Attempt {
	mount := Attempt{Name: UserNSMount, Technique: "unshare(CLONE_NEWUSER|CLONE_NEWNS), then mount a tmpfs"}
	ctx, cancel := context.WithTimeout(ctx, childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe", userNSArg, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		step := "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWCGROUP)"
		if len(stdout) > 0 || stderr.Len() > 0 {
			step = "the child in its new namespaces (" + strings.TrimSpace(stderr.String()) + ")"
		}
		b := blocked(mount, step, err)
		return []Attempt{b, {Name: ReleaseAgent, Technique: releaseTechnique, Outcome: Blocked, By: b.By}}
	}
	var got []Attempt
	if err := json.Unmarshal(stdout, &got); err != nil || len(got) == 0 {
		return []Attempt{blocked(mount, "reading the child's attempts", fmt.Errorf("%v: %q", err, clip(stdout)))}
	}
	return got
}

// inMountNS runs fn on an OS thread of its own in a new mount namespace,
// its mounts private, with a fresh mount point under dir: whatever fn
// mounts there dies with the thread. A guest that cannot make a mount
// namespace cannot mount either (both take CAP_SYS_ADMIN over its mount
// namespace), so fn is not run then and a is blocked with the reason.
func inMountNS(dir string, a Attempt, fn func(mnt string) Attempt) Attempt {
	return inThread(func() Attempt {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return blocked(a, "unshare(CLONE_NEWNS) (a mount takes the same CAP_SYS_ADMIN)", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return blocked(a, "make / private", err)
		}
		mnt, err := os.MkdirTemp(dir, "mnt-")
		if err != nil {
			return blocked(a, "mkdir", err)
		}
		defer os.Remove(mnt)
		return fn(mnt)
	})
}

// inThread runs fn on an OS thread that ends with it: namespaces it
// joins or makes, and processes it traces, go with the thread. A
// goroutine that ends locked to its thread takes the thread with it.
func inThread(fn func() Attempt) Attempt {
	ch := make(chan Attempt, 1)
	go func() {
		runtime.LockOSThread()
		ch <- fn()
	}()
	return <-ch
}

// releaseAgent mounts a cgroup v1 hierarchy at mnt and writes its
// release_agent the value it holds: the kernel takes the write or refuses
// it, and the value stays what it was. On a patched kernel the write is
// refused to anyone without CAP_SYS_ADMIN in the initial user namespace.
func releaseAgent(mnt string) Attempt {
	a := Attempt{Name: ReleaseAgent, Technique: releaseTechnique}
	var opts string
	var errs []string
	for _, o := range v1MountOptions() {
		err := unix.Mount("cgroup", mnt, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, o)
		if err == nil {
			opts = o
			break
		}
		errs = append(errs, "-o "+o+": "+ErrText(err))
	}
	if opts == "" {
		a.Outcome, a.By = Blocked, "mount -t cgroup "+strings.Join(errs, ", ")
		return a
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	path := filepath.Join(mnt, "release_agent")
	value, err := os.ReadFile(path)
	if err != nil {
		return blocked(a, "read release_agent", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return blocked(a, "open release_agent for writing", err)
	}
	defer f.Close()
	if len(bytes.TrimSpace(value)) == 0 {
		value = []byte("\n")
	}
	if _, err := f.Write(value); err != nil {
		return blocked(a, "write release_agent (its own value)", err)
	}
	return succeeded(a, fmt.Sprintf("mounted the hierarchy -o %s; its release_agent took a write (of its own value %q): a program named there runs as root on the host's kernel", opts, strings.TrimSpace(string(value))), "")
}

const releaseTechnique = "mount a cgroup v1 hierarchy, write its release_agent (CVE-2022-0492)"

// v1MountOptions are the cgroup v1 hierarchies to try: a controller the
// kernel has on v1 (rdma and misc first: rarely used, as the CVE's
// write-ups pick), else a named hierarchy of no controller, which the
// kernel removes at the unmount.
func v1MountOptions() []string {
	var opts []string
	b, _ := os.ReadFile("/proc/cgroups")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && !strings.HasPrefix(f[0], "#") && f[1] != "0" && f[3] == "1" {
			opts = append(opts, f[0])
		}
	}
	slices.SortStableFunc(opts, func(a, b string) int { return rank(a) - rank(b) })
	if len(opts) > 2 {
		opts = opts[:2]
	}
	return append(opts, "none,name=vfleet-attack")
}

func rank(controller string) int {
	switch controller {
	case "rdma":
		return 0
	case "misc":
		return 1
	}
	return 2
}

// corePattern opens the kernel's core dump handler for writing; the
// permission is checked at the open, and nothing is written.
func corePattern() Attempt {
	a := Attempt{Name: CorePattern, Technique: "open /proc/sys/kernel/core_pattern for writing (a pipe handler there runs as root)"}
	f, err := os.OpenFile("/proc/sys/kernel/core_pattern", os.O_WRONLY, 0)
	if err != nil {
		return blocked(a, "open for writing", err)
	}
	f.Close()
	return succeeded(a, "opened for writing (nothing written)", "")
}

// blockDevice opens the block devices the kernel lists, making a node for
// one the guest's /dev lacks, and mounts one it opened read-only without
// replaying its journal, in a mount namespace that dies with the attempt.
func blockDevice(dir string) Attempt {
	a := Attempt{Name: BlockDevice, Technique: "open a device of /proc/partitions (mknod if missing), mount it read-only"}
	b, err := os.ReadFile("/proc/partitions")
	if err != nil {
		return blocked(a, "read /proc/partitions", err)
	}
	var refusals []string
	parts := procfs.ParsePartitions(string(b))
	for _, p := range parts[:min(len(parts), 4)] {
		major, minor, name := p.Major, p.Minor, p.Name
		path, remove, err := deviceNode(dir, "/dev/"+name, unix.S_IFBLK, major, minor)
		if err != nil {
			refusals = append(refusals, name+": "+err.Error())
			continue
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		remove()
		if err != nil {
			refusals = append(refusals, name+": open: "+ErrText(err))
			continue
		}
		fsType := fsOf(fd)
		unix.Close(fd)
		mounted := "not mounted: no ext4 or XFS on it"
		if fsType != "" {
			mounted = inMountNS(dir, Attempt{}, func(mnt string) Attempt { return mountReadOnly(dir, name, major, minor, fsType, mnt) }).By
		}
		return succeeded(a, fmt.Sprintf("opened %s (%d:%d) for reading: its raw bytes are the guest's to read; %s", name, major, minor, mounted), fmt.Sprintf("%d:%d", major, minor))
	}
	if len(parts) == 0 {
		return blocked(a, "/proc/partitions", errors.New("lists no block device"))
	}
	a.Outcome, a.By = Blocked, strings.Join(refusals, "; ")
	return a
}

// mountReadOnly mounts a block device read-only with its journal left
// alone (ext4's noload, XFS's norecovery), so that not a block of it is
// written, and unmounts it; the result is said in By.
func mountReadOnly(dir, name string, major, minor int, fsType, mnt string) Attempt {
	path, remove, err := deviceNode(dir, "/dev/"+name, unix.S_IFBLK, major, minor)
	if err != nil {
		return Attempt{By: "mount: " + err.Error()}
	}
	defer remove()
	data := map[string]string{"ext4": "noload", "xfs": "norecovery"}[fsType]
	if err := unix.Mount(path, mnt, fsType, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		return Attempt{By: fmt.Sprintf("mount -t %s -o ro,%s refused: %s", fsType, data, ErrText(err))}
	}
	unix.Unmount(mnt, unix.MNT_DETACH)
	return Attempt{By: fmt.Sprintf("mounted read-only (%s, %s) and unmounted", fsType, data)}
}

// fsOf reads a device's superblock magic: ext2/3/4 or XFS, else "".
func fsOf(fd int) string {
	buf := make([]byte, 2048)
	if n, err := unix.Pread(fd, buf, 0); err != nil || n < len(buf) {
		return ""
	}
	switch {
	case bytes.Equal(buf[0:4], []byte("XFSB")):
		return "xfs"
	case buf[1080] == 0x53 && buf[1081] == 0xEF:
		return "ext4"
	}
	return ""
}

// deviceNode is the guest's own node of a device, or one made in dir when
// its /dev has none (a container's holds few), with what removes it.
func deviceNode(dir, path string, kind uint32, major, minor int) (string, func(), error) {
	if _, err := os.Stat(path); err == nil {
		return path, func() {}, nil
	}
	node := filepath.Join(dir, "node-"+filepath.Base(path))
	if err := unix.Mknod(node, kind|0o600, int(unix.Mkdev(uint32(major), uint32(minor)))); err != nil {
		return "", nil, fmt.Errorf("no %s, and mknod: %s", path, ErrText(err))
	}
	return node, func() { os.Remove(node) }, nil
}

// device opens a character device (made in dir when the guest's /dev
// lacks it) for reading and closes it.
func device(dir, name string, major, minor int) Attempt {
	a := Attempt{Name: name, Technique: "open " + name + " (mknod if missing)"}
	path, remove, err := deviceNode(dir, name, unix.S_IFCHR, major, minor)
	if err != nil {
		a.Outcome, a.By = Blocked, err.Error()
		return a
	}
	defer remove()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return blocked(a, "open", err)
	}
	unix.Close(fd)
	return succeeded(a, fmt.Sprintf("opened %s (char %d:%d) for reading", name, major, minor), fmt.Sprintf("%d:%d", major, minor))
}

// procRoot follows pid 1's root: the guest's own where it has a PID
// namespace, the host's where it shares the host's.
func procRoot() Attempt {
	a := Attempt{Name: ProcRoot, Technique: "stat /proc/1/root/ (pid 1's root directory)"}
	var st unix.Stat_t
	if err := unix.Stat("/proc/1/root/", &st); err != nil {
		return blocked(a, "stat", err)
	}
	return succeeded(a, "pid 1's root is directory "+FileID(st), FileID(st))
}

// procNS joins pid 1's mount namespace, on a thread that then ends.
func procNS() Attempt {
	a := Attempt{Name: ProcNS, Technique: "setns(2) into pid 1's mount namespace"}
	return inThread(func() Attempt {
		link, err := os.Readlink("/proc/1/ns/mnt")
		if err != nil {
			return blocked(a, "readlink /proc/1/ns/mnt", err)
		}
		fd, err := unix.Open("/proc/1/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return blocked(a, "open /proc/1/ns/mnt", err)
		}
		defer unix.Close(fd)
		// A mount namespace is joined by a thread that shares no file
		// system context (cwd, root) with the others.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return blocked(a, "unshare(CLONE_FS)", err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			return blocked(a, "setns", err)
		}
		return succeeded(a, "joined pid 1's mount namespace "+link, link)
	})
}

// ptracePid1 seizes pid 1 without stopping it; the thread that traces it
// then ends, which lets it go.
func ptracePid1() Attempt {
	a := Attempt{Name: Ptrace, Technique: "PTRACE_SEIZE pid 1 (not stopped, let go at once)"}
	link, _ := os.Readlink("/proc/1/ns/pid")
	return inThread(func() Attempt {
		if err := unix.PtraceSeize(1); err != nil {
			return blocked(a, "PTRACE_SEIZE", err)
		}
		return succeeded(a, "seized pid 1, of PID namespace "+link, link)
	})
}

// module asks the kernel to load an image that is no module: a kernel
// that lets the caller load modules reads it and rejects it as such.
func module() Attempt {
	a := Attempt{Name: Module, Technique: "init_module(2) of an image that is no module"}
	err := unix.InitModule(make([]byte, 64), "")
	switch {
	case err == nil:
		return succeeded(a, "the kernel loaded an empty image", "")
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSYS):
		return blocked(a, "init_module", err)
	}
	return succeeded(a, "init_module reached the kernel's loader, which rejected the image ("+ErrText(err)+"): a module would load", "")
}

// exeOverwrite opens the binaries of this process and of pid 1 for
// writing, never truncating or writing. A running binary cannot be opened
// so (ETXTBSY); CVE-2019-5736's way was to reopen it once its process
// ended, so then what the file's mount and owner allow is the answer.
func exeOverwrite() Attempt {
	a := Attempt{Name: ExeOverwrite, Technique: "open the running binaries (/proc/self/exe, /proc/1/exe) for writing (CVE-2019-5736's class)"}
	var refusals []string
	for _, path := range []string{"/proc/self/exe", "/proc/1/exe"} {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			refusals = append(refusals, path+": stat: "+ErrText(err))
			continue
		}
		dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return succeeded(a, path+" opened for writing (nothing written)", dev)
		}
		if !errors.Is(err, unix.ETXTBSY) {
			refusals = append(refusals, path+": open: "+ErrText(err))
			continue
		}
		if why := notRewritable(path, st); why != "" {
			refusals = append(refusals, path+": ETXTBSY while it runs; "+why)
			continue
		}
		return succeeded(a, path+": ETXTBSY while it runs, but it is on a read-write mount and the guest's root may write it: rewritable once its process ends", dev)
	}
	a.Outcome, a.By = Blocked, strings.Join(refusals, "; ")
	return a
}

// notRewritable says what keeps a running binary from being rewritten once
// it stops, or "" when nothing does.
func notRewritable(path string, st unix.Stat_t) string {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err == nil && fs.Flags&unix.ST_RDONLY != 0 {
		return "its mount is read-only"
	}
	const overflowID = 65534 // what an ID with no mapping in the user namespace shows as
	if st.Uid == overflowID && st.Mode&0o002 == 0 {
		return "its owner is outside the guest's user namespace"
	}
	euid := uint32(os.Geteuid())
	switch {
	case euid == st.Uid && st.Mode&0o200 != 0, st.Mode&0o002 != 0:
		return ""
	case euid == 0 && hasCap(unix.CAP_DAC_OVERRIDE):
		return ""
	}
	return "the guest's user may not write it"
}

// hasCap reads the calling process's effective capabilities.
func hasCap(c int) bool {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && bits&(1<<uint(c)) != 0
		}
	}
	return false
}

// shocker opens files by handle (CVE-2014-3519's "shocker"): first one of
// a mount's own, which tells whether the call is allowed at all, then the
// root directory of that mount's file system by its inode number, which
// on a file system mounted in from the host is the host's.
func shocker() Attempt {
	a := Attempt{Name: Shocker, Technique: "open_by_handle_at(2) of a mounted file, then of its file system's root by inode number"}
	var refusals []string
	permitted := ""
	for _, m := range handleMounts() {
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, m, 0)
		if err != nil {
			refusals = append(refusals, m+": name_to_handle_at: "+ErrText(err))
			continue
		}
		// The mount's descriptor must be open for real: the call takes
		// no O_PATH one.
		mfd, err := unix.Open(m, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			refusals = append(refusals, m+": open: "+ErrText(err))
			continue
		}
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_PATH|unix.O_CLOEXEC)
		if err != nil {
			unix.Close(mfd)
			refusals = append(refusals, m+": open_by_handle_at: "+ErrText(err))
			continue
		}
		unix.Close(fd)
		permitted = m
		// ext4's and most file systems' root is inode 2, generation 0,
		// in the handle type FILEID_INO32_GEN.
		root := make([]byte, 8)
		root[0] = 2
		rfd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(1, root), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		unix.Close(mfd)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		err = unix.Fstat(rfd, &st)
		unix.Close(rfd)
		if err == nil {
			return succeeded(a, "opened the root directory ("+FileID(st)+") of the file system of "+m+" by its inode number", FileID(st))
		}
	}
	if permitted != "" {
		return succeeded(a, "open_by_handle_at is allowed (on "+permitted+"); no file system root was reached by inode number", "")
	}
	if len(refusals) == 0 {
		refusals = []string{"no mount to try"}
	}
	a.Outcome, a.By = Blocked, strings.Join(refusals, "; ")
	return a
}

// handleMounts are the mount points to try handles on: the root, and
// files or directories bound in from elsewhere on a disk file system
// (/etc/hosts and the like, where a runtime binds them), at most six.
func handleMounts() []string {
	out := []string{"/"}
	mounts, _ := procfs.Mounts("/proc")
	for _, m := range mounts {
		switch m.FSType {
		case "ext4", "xfs", "btrfs", "ext3", "ext2":
			if m.Point != "/" && len(out) < 6 {
				out = append(out, m.Point)
			}
		}
	}
	return out
}

// FileID names a file as "major:minor:inode" of its device.
func FileID(st unix.Stat_t) string {
	return fmt.Sprintf("%d:%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}

func blocked(a Attempt, step string, err error) Attempt {
	a.Outcome, a.By = Blocked, step+": "+ErrText(err)
	return a
}

func succeeded(a Attempt, evidence, reached string) Attempt {
	a.Outcome, a.Evidence, a.Reached = Succeeded, evidence, reached
	return a
}

// ErrText names an error by its errno where it has one, the form the
// audit's parsers read.
func ErrText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
