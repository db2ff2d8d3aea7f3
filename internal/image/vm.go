package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/tools"
)

// vmFormat changes whenever the way a VM's boot files are made changes, so
// that boot files made the old way are rebuilt.
const vmFormat = 3

// VMModules are the modules a VM guest needs before its root disk can be
// mounted and its agent reached, when the kernel has them as modules:
// virtio over PCI (q35) and over MMIO (microvm), the block disk, the
// serial port the agent serves on, and the power button (where the
// architecture's kernel has its driver) with the event device init reads
// it from, so a host's powerdown request is seen.
// virtio_net is the NIC on a network data path; init configures it before
// the agent starts, when the root disk's own modules are not loaded yet.
func VMModules(arch string) []string {
	m := []string{"virtio_pci", "virtio_mmio", "virtio_blk", "virtio_console", "virtio_net", "evdev"}
	if b := PowerButtonModule(arch); b != "" {
		m = append(m, b)
	}
	return m
}

// rootFSModules are the root file system's and the checksum its metadata
// needs (ext4 asks the crypto API for crc32c by name, no symbol links
// them): built into the cloud kernels, modules of the rt kernel; loaded
// where the kernel has them as modules.
var rootFSModules = []string{"crc32c_generic", "ext4"}

// PowerButtonModule is the driver of the power button QEMU presses for a
// guest of arch, "" where vfleet's kernel has none: x86-64's is ACPI's;
// arm64's virt machine booted with a device tree has a GPIO key, whose
// driver (gpio_keys) the arm64 cloud kernel leaves out.
func PowerButtonModule(arch string) string {
	if arch == "amd64" {
		return "button"
	}
	return ""
}

// VMBoot is what a VM guest boots from. All paths are on the host.
type VMBoot struct {
	Kernel string
	// Initramfs is empty when the kernel has every VM module built in.
	Initramfs string
	// BaseDisk is the image as a qcow2 disk with one ext4 file system, to
	// be used read-only as the backing file of each guest's own disk.
	BaseDisk string
	// Root is the kernel's root= for the disk.
	Root string
}

// vmInitConfig mirrors the guest init's configuration file (package
// vminit): the modules to load, then the program to hand over to.
type vmInitConfig struct {
	Modules []string `json:"modules"`
	Init    string   `json:"init"`
}

// vmInitConfigPath is where the guest's first stage looks for it.
const vmInitConfigPath = "/vfleet-initramfs.json"

// diskHeadroom is the free space the guest's file system gets on top of
// the image's files: workloads write their files inside the guest. The
// disk is sparse, so unused room costs nothing.
const diskHeadroom = 4 << 30

// ForRootFS opens the image whose root filesystem is rootfs.
func ForRootFS(rootfs string) (*Image, error) {
	dir := filepath.Dir(filepath.Clean(rootfs))
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("open image of %s: %w", rootfs, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("open image of %s: manifest: %w", rootfs, err)
	}
	img := &Image{Dir: dir, RootFS: filepath.Join(dir, "rootfs"), Manifest: m, AgentPath: AgentPath}
	if m.Kernel != "" {
		img.KernelPath = filepath.Join(img.RootFS, m.Kernel)
	}
	if m.Initrd != "" {
		img.InitrdPath = filepath.Join(img.RootFS, m.Initrd)
	}
	return img, nil
}

// ErrNoKernel says the image has no kernel for VM guests to boot.
var ErrNoKernel = errors.New("guest image has no kernel")

// EnsureVMBoot returns the image's VM boot files, making them once per
// image and agent under the image lock: a raw ext4 file system filled
// from the rootfs by mkfs.ext4 -d, converted to qcow2, and an initramfs
// with the agent as its init when the kernel needs modules loaded. They
// are built in a temporary directory renamed into place on success.
func EnsureVMBoot(ctx context.Context, img *Image, progress func(string)) (VMBoot, error) {
	if progress == nil {
		progress = func(string) {}
	}
	if img.KernelPath == "" {
		return VMBoot{}, fmt.Errorf("%w: add linux-image-cloud-%s to the image recipe", ErrNoKernel, img.Manifest.Recipe.ArchOf())
	}
	var boot VMBoot
	var final, initramfs, key string
	have := func() bool {
		key = vmKey(img)
		final = filepath.Join(img.Dir, "vm-"+key[:16])
		initramfs = filepath.Join(final, "initramfs.cpio")
		boot = VMBoot{Kernel: img.KernelPath, BaseDisk: filepath.Join(final, "base.qcow2"), Root: "/dev/vda"}
		if _, err := os.Stat(filepath.Join(final, "done")); err != nil {
			return false
		}
		if _, err := os.Stat(initramfs); err == nil {
			boot.Initramfs = initramfs
		}
		return true
	}
	if have() {
		return boot, nil
	}
	// The image's own lock: the agent Ensure installs is what goes on the disk.
	unlock, err := lockBuild(ctx, img.Dir, "making the VM base disk of the "+img.Manifest.Recipe.String(), progress)
	if err != nil {
		return VMBoot{}, err
	}
	defer unlock()
	// Another vfleet may have installed another agent meanwhile: what is
	// in the rootfs now is what goes on the disk.
	if img, err = ForRootFS(img.RootFS); err != nil {
		return VMBoot{}, err
	}
	if have() {
		return boot, nil
	}
	removeStaleVMBoots(img.Dir, filepath.Base(final))
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return VMBoot{}, fmt.Errorf("%w: mkfs.ext4 not found in PATH: %s", ErrMissingTool, tools.DebianInstall("e2fsprogs"))
	}
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		return VMBoot{}, fmt.Errorf("%w: qemu-img not found in PATH: %s", ErrMissingTool, tools.DebianInstall("qemu-utils"))
	}
	tmp, err := os.MkdirTemp(img.Dir, ".vm-build-")
	if err != nil {
		return VMBoot{}, fmt.Errorf("vm disk: %w", err)
	}
	defer os.RemoveAll(tmp)
	began := time.Now()
	progress("making the VM base disk from the image")
	withInitramfs, err := writeInitramfs(img, filepath.Join(tmp, "initramfs.cpio"))
	if err != nil {
		return VMBoot{}, err
	}
	if err := makeBaseDisk(ctx, mkfs, qemuImg, img.RootFS, tmp); err != nil {
		return VMBoot{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "done"), []byte(key+"\n"), 0o644); err != nil {
		return VMBoot{}, fmt.Errorf("vm disk: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return VMBoot{}, fmt.Errorf("vm disk: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return VMBoot{}, fmt.Errorf("vm disk: %w", err)
	}
	if withInitramfs {
		boot.Initramfs = initramfs
	}
	progress(fmt.Sprintf("VM base disk made in %s", time.Since(began).Round(time.Second)))
	return boot, nil
}

// vmKey names one image with one agent: the base disk holds the agent, so
// a new agent needs a new disk.
func vmKey(img *Image) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%d\n%s\n%s\n", vmFormat, img.Manifest.Hash, img.Manifest.AgentSHA256))))
}

// VMBootDirs lists the directories of VM boot files of every image under
// root: where each keeps what is derived from it for VMs (its base disk,
// and VM templates).
func VMBootDirs(root string) ([]string, error) {
	return filepath.Glob(filepath.Join(imagesDir(root), "*", "vm-*"))
}

// removeStaleVMBoots deletes boot files of other agents and interrupted
// builds; the caller holds the image lock. A guest still running from an
// old base disk keeps it open, so its data stays until QEMU exits.
func removeStaleVMBoots(dir, keep string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if n != keep && (strings.HasPrefix(n, "vm-") || strings.HasPrefix(n, ".vm-build-")) {
			_ = os.RemoveAll(filepath.Join(dir, n))
		}
	}
}

// makeBaseDisk writes base.qcow2 into dir.
func makeBaseDisk(ctx context.Context, mkfs, qemuImg, rootfs, dir string) error {
	used, err := treeSize(rootfs)
	if err != nil {
		return fmt.Errorf("vm disk: %w", err)
	}
	size := (used + used/4 + diskHeadroom + 1<<20 - 1) &^ (1<<20 - 1)
	raw := filepath.Join(dir, "base.raw")
	f, err := os.Create(raw)
	if err != nil {
		return fmt.Errorf("vm disk: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("vm disk: %w", err)
	}
	defer os.Remove(raw)
	if err := runTool(ctx, mkfs, MkfsArgs(rootfs, raw)...); err != nil {
		return err
	}
	return runTool(ctx, qemuImg, "convert", "-q", "-f", "raw", "-O", "qcow2", raw, filepath.Join(dir, "base.qcow2"))
}

// MkfsArgs is mkfs.ext4's argv (after the program) for a root file system
// filled from rootfs. No reserved blocks: the guest runs as root anyway.
func MkfsArgs(rootfs, target string) []string {
	return []string{"-q", "-F", "-L", "vfleet-root", "-m", "0", "-d", rootfs, target}
}

func runTool(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("vm disk: %s interrupted: %w", filepath.Base(bin), ctx.Err())
		}
		return fmt.Errorf("vm disk: %s: %w: %s", filepath.Base(bin), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// treeSize adds up the sizes of a tree's files, each rounded up to whole
// 4 KiB blocks.
func treeSize(root string) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += (info.Size() + 4095) &^ 4095
		return nil
	})
	return total, err
}

// writeInitramfs writes the initramfs when the kernel has some VM module
// as a module; it reports false when none is needed.
func writeInitramfs(img *Image, path string) (bool, error) {
	release := strings.TrimPrefix(filepath.Base(img.Manifest.Kernel), "vmlinuz-")
	modDir := filepath.Join(img.RootFS, "lib/modules", release)
	depFile, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return false, fmt.Errorf("vm initramfs: %w", err)
	}
	deps, err := ParseModulesDep(depFile)
	depFile.Close()
	if err != nil {
		return false, fmt.Errorf("vm initramfs: %w", err)
	}
	builtin := map[string]bool{}
	if f, err := os.Open(filepath.Join(modDir, "modules.builtin")); err == nil {
		builtin, err = ParseModulesBuiltin(f)
		f.Close()
		if err != nil {
			return false, fmt.Errorf("vm initramfs: %w", err)
		}
	}
	order, err := deps.LoadOrder(append(VMModules(img.Manifest.Recipe.ArchOf()), deps.Present(rootFSModules)...), builtin)
	if err != nil {
		return false, fmt.Errorf("vm initramfs: %w", err)
	}
	if len(order) == 0 {
		return false, nil
	}
	agentBin, err := os.ReadFile(filepath.Join(img.RootFS, img.AgentPath))
	if err != nil {
		return false, fmt.Errorf("vm initramfs: agent: %w", err)
	}
	var buf bytes.Buffer
	w := NewCPIOWriter(&buf)
	for _, d := range []string{"dev", "proc", "sys", "newroot", "modules"} {
		w.Dir(d, 0o755)
	}
	// The kernel opens /dev/console for init before anything is mounted.
	w.CharDev("dev/console", 0o600, 5, 1)
	cfg := vmInitConfig{Init: img.AgentPath}
	for i, m := range order {
		b, err := os.ReadFile(filepath.Join(modDir, m))
		if err != nil {
			return false, fmt.Errorf("vm initramfs: %w", err)
		}
		name := fmt.Sprintf("/modules/%02d-%s", i, filepath.Base(m))
		w.File(name, 0o644, b)
		cfg.Modules = append(cfg.Modules, name)
	}
	cb, _ := json.Marshal(cfg)
	w.File(vmInitConfigPath, 0o644, cb)
	w.File("init", 0o755, agentBin)
	if err := w.Close(); err != nil {
		return false, err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return false, fmt.Errorf("vm initramfs: %w", err)
	}
	return true, nil
}
