package vminit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// rootWait bounds the wait for the root disk to appear once its driver is
// loaded; probing is asynchronous, and slow under emulation.
const rootWait = 30 * time.Second

// InInitramfs reports whether this process runs from a vfleet initramfs.
func InInitramfs() bool {
	_, err := os.Stat(ConfigPath)
	return err == nil
}

// Stage1 loads the modules, mounts the root disk named by root= read-only
// and switches to it, then executes the configured init with args. It
// returns only on failure.
func Stage1(args []string) error {
	b, err := os.ReadFile(ConfigPath)
	if err != nil {
		return fmt.Errorf("stage 1: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("stage 1: %s: %w", ConfigPath, err)
	}
	for _, m := range []mountPoint{{"devtmpfs", "/dev", "devtmpfs", 0}, {"proc", "/proc", "proc", 0}, {"sysfs", "/sys", "sysfs", 0}} {
		if err := m.mount(); err != nil {
			return fmt.Errorf("stage 1: %w", err)
		}
	}
	for _, m := range cfg.Modules {
		if err := loadModule(m); err != nil {
			return fmt.Errorf("stage 1: %w", err)
		}
	}
	params := readCmdline()
	root, fstype := params["root"], params["rootfstype"]
	if root == "" {
		return errors.New("stage 1: no root= on the kernel command line")
	}
	if fstype == "" {
		fstype = "ext4"
	}
	if err := waitFor(root, rootWait); err != nil {
		return fmt.Errorf("stage 1: root disk: %w", err)
	}
	if err := mountRoot(root, fstype, unix.MS_RDONLY); err != nil {
		return fmt.Errorf("stage 1: %w", err)
	}
	if err := switchRoot(); err != nil {
		return fmt.Errorf("stage 1: %w", err)
	}
	argv := append([]string{cfg.Init}, args...)
	if err := unix.Exec(cfg.Init, argv, os.Environ()); err != nil {
		return fmt.Errorf("stage 1: exec %s: %w", cfg.Init, err)
	}
	return nil
}

// newRoot is where the root disk is mounted before it becomes /.
const newRoot = "/newroot"

// mountRoot mounts the root disk on newRoot.
func mountRoot(root, fstype string, flags uintptr) error {
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(root, newRoot, fstype, flags, ""); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", root, fstype, newRoot, err)
	}
	return nil
}

// switchRoot makes the disk on newRoot the root, taking /dev, /proc and
// /sys along, as switch_root does.
func switchRoot() error {
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := unix.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s into the root disk: %w", d, err)
		}
	}
	// The initramfs stays in memory for the VM's life unless emptied, as
	// switch_root does; its largest file is this very binary.
	emptyInitramfs(newRoot)
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the root disk to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return os.Chdir("/")
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// emptyInitramfs removes the initramfs's files, leaving the mount points
// that now hold the moved filesystems and the new root.
func emptyInitramfs(keep string) {
	entries, _ := os.ReadDir("/")
	for _, e := range entries {
		p := "/" + e.Name()
		switch p {
		case keep, "/dev", "/proc", "/sys":
			continue
		}
		_ = os.RemoveAll(p)
	}
}

func waitFor(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readCmdline() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	return ParseCmdline(string(b))
}

type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
}

// mount mounts unless something is mounted there already (stage 1 moved
// /dev, /proc and /sys along).
func (m mountPoint) mount() error {
	if err := os.MkdirAll(m.target, 0o755); err != nil {
		return err
	}
	if mounted(m.target) {
		return nil
	}
	if err := unix.Mount(m.source, m.target, m.fstype, m.flags, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
	}
	return nil
}

// mounted compares the directory's device with its parent's: a mount
// point sits on another device than the directory above it.
func mounted(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Stat(dir, &st) != nil || unix.Stat(filepath.Join(dir, ".."), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}
