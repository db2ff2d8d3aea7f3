package vminit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/guest/identity"
)

// A user's VM image boots its own init (systemd, or whatever it has) from
// its own disk, which vfleet does not change. The agent gets in through
// the initramfs instead: vfleet appends a small archive holding the agent
// to the user's initrd (or boots with that archive alone) and makes the
// kernel run the agent first (rdinit=). The agent starts a copy of itself
// as the serving agent, then hands PID 1 over to the user's init: the
// initrd's own /init, which mounts the root disk and switches to it as it
// always does, or, without an initrd, the image's init once the agent has
// mounted the root itself. The serving copy waits until PID 1 has switched
// to the real root, follows it there, and serves on the virtio-serial port
// while the image's init boots the rest of the system.

// Kernel command line parameters of a user image's boot.
const (
	// ParamNextInit is the user's own rdinit=, run in place of the
	// initrd's /init once the agent is started.
	ParamNextInit = "vfleet.rdinit"
	// ParamRDInit is the kernel's parameter naming the initramfs's first
	// program.
	ParamRDInit = "rdinit"
)

// BesideInitPath is where the agent sits in the archive vfleet adds to a
// user's initramfs; the kernel runs it first (rdinit=).
const BesideInitPath = "/vfleet/init"

// SeedParamsArg starts the agent in a firmware-booted user's image:
// cloud-init runs it with the path of vfleet's parameters, in kernel
// command line syntax, copied from the seed.
const SeedParamsArg = "--seed-params"

// BesideAgentArg is the argument the serving copy of the agent is started
// with; it inherits the initramfs's /proc as descriptor 3.
const BesideAgentArg = "--beside-agent"

// besideAgentName is the serving copy's argv[0]. A systemd initrd kills
// the processes it left behind when it switches root, except those whose
// argv[0] starts with '@' (systemd's convention for daemons that must
// outlive the initrd, such as a root storage daemon).
const besideAgentName = "@vfleet-agent"

const (
	// rootSwitchWait bounds the serving copy's wait for PID 1 to switch to
	// the real root: a whole initrd runs before that, under emulation.
	rootSwitchWait = 10 * time.Minute
	// BesidePortWait bounds the wait for the agent's port: in a user's
	// image, udev may load the virtio console's driver late in the boot.
	BesidePortWait = 3 * time.Minute
	// besideNICWait is the same for the NIC's driver.
	besideNICWait = 2 * time.Minute
	// writableWait bounds the wait for the root to be writable, which an
	// image's init may make it only after mounting what its fstab says.
	writableWait = 2 * time.Minute
)

// Beside is the agent as the first process of a user image's initramfs: it
// starts the serving copy and becomes the user's init. It returns only on
// failure.
func Beside(args []string) error {
	if err := (mountPoint{"proc", "/proc", "proc", 0}).mount(); err != nil {
		return fmt.Errorf("vfleet initramfs: %w", err)
	}
	params := readCmdline()
	proc, err := os.Open("/proc")
	if err != nil {
		return fmt.Errorf("vfleet initramfs: %w", err)
	}
	// The kernel opened the console as the first program's standard
	// files. The copy gets them too: a Go program whose standard files
	// are closed opens /dev/null instead, which an initrd may not have
	// yet, and dies.
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr, proc}
	if _, err := os.StartProcess("/proc/self/exe", []string{besideAgentName, BesideAgentArg},
		&os.ProcAttr{Env: os.Environ(), Files: files}); err != nil {
		return fmt.Errorf("vfleet initramfs: start the agent: %w", err)
	}
	proc.Close()
	next := params[ParamNextInit]
	if next == "" {
		next = "/init"
	}
	if _, err := os.Stat(next); err == nil {
		// The user's initrd mounts /proc itself; the agent holds its own
		// descriptor of this one.
		_ = unix.Unmount("/proc", unix.MNT_DETACH)
		return execInit(next, args)
	}
	if params[ParamNextInit] != "" {
		return fmt.Errorf("vfleet initramfs: rdinit %s is not in the initrd", next)
	}
	return bootRootItself(params, args)
}

// bootRootItself mounts the root disk the way the kernel would have
// without an initramfs and runs the image's init there. The kernel must
// have its disk's driver built in: there is no initrd to load it from.
func bootRootItself(params map[string]string, args []string) error {
	for _, m := range []mountPoint{{"devtmpfs", "/dev", "devtmpfs", 0}, {"sysfs", "/sys", "sysfs", 0}} {
		if err := m.mount(); err != nil {
			return fmt.Errorf("vfleet initramfs: %w", err)
		}
	}
	root, fstype := params["root"], params["rootfstype"]
	if !strings.HasPrefix(root, "/dev/") {
		return fmt.Errorf("vfleet initramfs: root=%q: without an initrd, give the root device's path (root=/dev/vda1), or give an initrd that finds it", root)
	}
	if fstype == "" {
		fstype = "ext4"
	}
	if err := waitFor(root, rootWait); err != nil {
		return fmt.Errorf("vfleet initramfs: root disk: %w (without an initrd the kernel needs its disk driver, virtio_blk, built in; give the initrd that goes with the kernel)", err)
	}
	var flags uintptr = unix.MS_RDONLY
	if _, rw := params["rw"]; rw {
		flags = 0
	}
	if err := mountRoot(root, fstype, flags); err != nil {
		return fmt.Errorf("vfleet initramfs: %w", err)
	}
	if err := switchRoot(); err != nil {
		return fmt.Errorf("vfleet initramfs: %w", err)
	}
	inits := []string{"/sbin/init", "/etc/init", "/bin/init", "/bin/sh"}
	if i := params["init"]; i != "" {
		inits = []string{i}
	}
	for _, i := range inits {
		if _, err := os.Stat(i); err == nil {
			return execInit(i, args)
		}
	}
	return fmt.Errorf("vfleet initramfs: the root disk has no init (looked for %s)", strings.Join(inits, ", "))
}

func execInit(path string, args []string) error {
	if err := unix.Exec(path, append([]string{path}, args...), os.Environ()); err != nil {
		return fmt.Errorf("vfleet initramfs: exec %s: %w", path, err)
	}
	return nil
}

// BesideConfig is what the serving copy learnt from the kernel command
// line once it is in the real root.
type BesideConfig struct {
	Port string
}

// EnterGuestRoot is the serving copy's start: it waits for PID 1 to
// switch to the real root, follows it, and sets up what the agent needs
// there (SetUpBeside). proc is the initramfs's /proc, which outlives its
// mount.
func EnterGuestRoot(proc *os.File, workdir string) (BesideConfig, error) {
	defer proc.Close()
	var initial unix.Stat_t
	if err := unix.Stat("/", &initial); err != nil {
		return BesideConfig{}, err
	}
	deadline := time.Now().Add(rootSwitchWait)
	for {
		var st unix.Stat_t
		if err := unix.Fstatat(int(proc.Fd()), "1/root/", &st, 0); err == nil && (st.Dev != initial.Dev || st.Ino != initial.Ino) {
			break
		}
		if time.Now().After(deadline) {
			return BesideConfig{}, fmt.Errorf("init did not switch to the root disk within %s", rootSwitchWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	root, err := unix.Openat(int(proc.Fd()), "1/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return BesideConfig{}, fmt.Errorf("open init's root: %w", err)
	}
	err = unix.Fchdir(root)
	unix.Close(root)
	if err != nil {
		return BesideConfig{}, err
	}
	if err := unix.Chroot("."); err != nil {
		return BesideConfig{}, fmt.Errorf("chroot into init's root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return BesideConfig{}, err
	}
	// The initrd moves its /proc into the root, or the image's init
	// mounts one; until then the agent cannot read the command line.
	if err := waitFor("/proc/self/stat", rootSwitchWait); err != nil {
		return BesideConfig{}, err
	}
	return SetUpBeside(readCmdline(), workdir)
}

// SetUpBeside sets up what the agent needs in a guest whose own init
// boots it, from vfleet's parameters (the kernel command line's, or a
// seed's): identity, its working directory, loopback, the NIC when the
// host gave one. The image's init may make the root writable only later:
// files are written once it is.
func SetUpBeside(params map[string]string, workdir string) (BesideConfig, error) {
	if err := os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"); err != nil {
		return BesideConfig{}, err
	}
	if h := params[ParamHostname]; h != "" {
		if err := unix.Sethostname([]byte(h)); err != nil {
			return BesideConfig{}, fmt.Errorf("set hostname: %w", err)
		}
		go writeWhenWritable(func() error { return identity.Write("/", h) })
	}
	if workdir != "" {
		go writeWhenWritable(func() error {
			if err := os.MkdirAll(workdir, 0o1777); err != nil {
				return err
			}
			return os.Chmod(workdir, 0o1777)
		})
	}
	if err := loopbackUp(); err != nil {
		logf("loopback: %v", err)
	}
	if v, ok := params[ParamNet]; ok {
		c, err := ParseNetConfig(v)
		if err != nil {
			return BesideConfig{}, err
		}
		if err := configureNetWithin(c, besideNICWait); err != nil {
			return BesideConfig{}, err
		}
	}
	port := params[ParamPort]
	if port == "" {
		return BesideConfig{}, fmt.Errorf("no %s= among vfleet's parameters", ParamPort)
	}
	return BesideConfig{Port: "/dev/virtio-ports/" + port}, nil
}

// writeWhenWritable retries write while the root is read-only: the
// image's init remounts it as its fstab says, after the agent is up.
func writeWhenWritable(write func() error) {
	ctx, cancel := context.WithTimeout(context.Background(), writableWait)
	defer cancel()
	for {
		err := write()
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EROFS) || ctx.Err() != nil {
			logf("%v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
