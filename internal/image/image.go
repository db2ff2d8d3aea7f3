package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/flock"
	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/tools"
)

// AgentPath is where the agent lives inside every image.
const AgentPath = "/usr/local/bin/vfleet-agent"

var (
	// ErrMissingTool is returned when the image builder is not installed.
	ErrMissingTool = errors.New("image builder not installed")
	// ErrNotBuilt is returned by Open when the image does not exist yet.
	ErrNotBuilt = errors.New("guest image not built")
)

// Manifest describes a built image; it is written last, so its presence
// marks the image complete.
type Manifest struct {
	Recipe        Recipe            `json:"recipe"`
	Hash          string            `json:"hash"`
	Built         time.Time         `json:"built"`
	BuildDuration time.Duration     `json:"build_duration_ns"`
	Packages      map[string]string `json:"packages"`
	Kernel        string            `json:"kernel,omitempty"` // path inside the rootfs
	Initrd        string            `json:"initrd,omitempty"`
	AgentSHA256   string            `json:"agent_sha256,omitempty"`
}

// Image is a built image.
type Image struct {
	Dir      string
	RootFS   string
	Manifest Manifest
	// AgentPath is the agent's path inside the image.
	AgentPath string
	// KernelPath and InitrdPath are host paths of the guest kernel, empty
	// when the recipe has none.
	KernelPath string
	InitrdPath string
}

// DefaultRoot is vfleet's state directory unless told otherwise (--state-dir,
// VFLEET_STATE_DIR): its images live in DefaultRoot/images.
const DefaultRoot = "/var/lib/vfleet"

// EnsureOptions configure Ensure.
type EnsureOptions struct {
	Root        string // images live in Root/images
	Recipe      Recipe
	AgentBinary string // the static agent to install
	Rebuild     bool
	Progress    func(line string)
}

func imagesDir(root string) string { return filepath.Join(root, "images") }

// Open returns an existing image without building anything.
func Open(root string, r Recipe) (*Image, error) {
	dir := filepath.Join(imagesDir(root), r.Hash())
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (run 'vfleet image build')", ErrNotBuilt)
	}
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("open image: manifest: %w", err)
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

// Ensure returns the image for the recipe, building it if needed, with the
// given agent installed.
func Ensure(ctx context.Context, o EnsureOptions) (*Image, error) {
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	hash := o.Recipe.Hash()
	final := filepath.Join(imagesDir(o.Root), hash)
	unlock, err := lockBuild(ctx, final, "preparing the "+o.Recipe.String(), o.Progress)
	if err != nil {
		return nil, err
	}
	defer unlock()

	removeStaleBuilds(final)
	if o.Rebuild {
		if err := os.RemoveAll(final); err != nil {
			return nil, fmt.Errorf("image: remove old image: %w", err)
		}
	}
	img, err := Open(o.Root, o.Recipe)
	if errors.Is(err, ErrNotBuilt) {
		if err := build(ctx, o, final); err != nil {
			return nil, err
		}
		img, err = Open(o.Root, o.Recipe)
	}
	if err != nil {
		return nil, err
	}
	if o.AgentBinary != "" {
		if err := installAgent(img, o.AgentBinary, o.Progress); err != nil {
			return nil, err
		}
	}
	return img, nil
}

const buildPrefix = ".build-"

// lockBuild takes the lock of what is built into final (an image, an
// unpacked OCI image), under which it is built once. Each has its own
// lock, so that one build never holds up another's users; a caller that
// must wait says at once (through progress) who holds it and for what.
func lockBuild(ctx context.Context, final, what string, progress func(string)) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	lock := final + ".lock"
	return flock.LockFor(ctx, lock, what, func(h flock.Holder) {
		progress(fmt.Sprintf("waiting for %s (lock %s)", h, lock))
	})
}

// buildDirPrefix names the temporary directories in which final is built:
// its own, so that removing a killed build's leftovers never touches
// another build under way beside it.
func buildDirPrefix(final string) string {
	name := filepath.Base(final)
	return buildPrefix + name[:min(len(name), 16)] + "-"
}

// build runs mmdebstrap into a temporary directory and renames it into
// place once the manifest is written.
func build(ctx context.Context, o EnsureOptions, final string) (err error) {
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return fmt.Errorf("%w: mmdebstrap not found in PATH: %s", ErrMissingTool, tools.DebianInstall("mmdebstrap"))
	}
	if err := CheckCanRun(ctx, o.Recipe.Arch); err != nil {
		return err
	}
	if o.Recipe.Programs != "" {
		// Before minutes of mmdebstrap: a missing compiler is known now.
		if _, err := native.Compiler(o.Recipe.ArchOf()); err != nil {
			return fmt.Errorf("%w: vfleet's own programs: %v", ErrMissingTool, err)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), buildDirPrefix(final))
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer func() {
		if err != nil {
			removeBuildDir(tmp)
		}
	}()
	began := time.Now()
	rootfs := filepath.Join(tmp, "rootfs")
	o.Progress(fmt.Sprintf("building %s image with %s (recipe %.12s)", o.Recipe.Suite, strings.Join(o.Recipe.Packages, ", "), o.Recipe.Hash()))
	cmd := exec.CommandContext(ctx, bin, o.Recipe.mmdebstrapArgs(rootfs)...)
	// mmdebstrap exits on SIGTERM while the dpkg and apt processes it started
	// go on writing into the tree, so a cancelled build signals its whole
	// process group: SIGTERM first, for mmdebstrap's own cleanup, then
	// SIGKILL for whatever is still there.
	//
	// Its own mount namespace (private, so nothing propagates back) keeps
	// the /proc, /sys and /dev it mounts in the tree out of the host's
	// mount table: a build beside a run or a test is not seen there, and a
	// killed build leaves no mounts behind.
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Unshareflags: unix.CLONE_NEWNS}
	if o.Recipe.NoInitrd {
		// Debian's kernel hook (/etc/kernel/postinst.d/initramfs-tools)
		// makes no initrd when INITRD is No.
		cmd.Env = append(os.Environ(), "INITRD=No")
	}
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		err := unix.Kill(-pgid, unix.SIGTERM)
		time.AfterFunc(3*time.Second, func() { _ = unix.Kill(-pgid, unix.SIGKILL) })
		return err
	}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("image: start mmdebstrap: %w", err)
	}
	var last []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		last = append(last, line)
		if len(last) > 15 {
			last = last[1:]
		}
		if strings.HasPrefix(line, "I: ") || strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
			o.Progress(line)
		}
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("image build interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("image: mmdebstrap failed: %w:\n%s", err, strings.Join(last, "\n"))
	}
	if o.Recipe.Programs != "" {
		o.Progress("building vfleet's own programs for " + o.Recipe.ArchOf())
		if err := native.Build(ctx, o.Recipe.ArchOf(), rootfs); err != nil {
			return fmt.Errorf("image: %w", err)
		}
	}
	m, err := describe(o.Recipe, rootfs)
	if err != nil {
		return err
	}
	m.Built, m.BuildDuration = time.Now().UTC(), time.Since(began)
	if err := writeManifest(tmp, m); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	o.Progress(fmt.Sprintf("image built in %s", m.BuildDuration.Round(time.Second)))
	return nil
}

// QEMUArch is QEMU's (and the kernel's) name of a Debian architecture.
func QEMUArch(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return arch
}

// CheckCanRun says whether this host runs programs of a foreign arch
// (empty for the host's), which building its image needs: the packages'
// maintainer scripts run inside the image.
func CheckCanRun(ctx context.Context, arch string) error {
	if arch == "" {
		return nil
	}
	archTest, err := exec.LookPath("arch-test")
	if err != nil {
		return fmt.Errorf("%w: arch-test not found in PATH: %s", ErrMissingTool, tools.DebianInstall("arch-test"))
	}
	out, err := exec.CommandContext(ctx, archTest, arch).CombinedOutput()
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: this %s host cannot run %s programs, which building an %s image needs: install the Debian packages qemu-user-static and binfmt-support, then register the emulator (mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; update-binfmts --enable qemu-%s); arch-test says: %s",
		ErrMissingTool, HostArch, arch, arch, QEMUArch(arch), strings.TrimSpace(string(out)))
}

// describe reads what a fresh rootfs contains.
func describe(r Recipe, rootfs string) (Manifest, error) {
	m := Manifest{Recipe: r, Hash: r.Hash()}
	f, err := os.Open(filepath.Join(rootfs, "var/lib/dpkg/status"))
	if err != nil {
		return m, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	if m.Packages, err = ParseDpkgStatus(f); err != nil {
		return m, fmt.Errorf("image: %w", err)
	}
	m.Kernel, m.Initrd = newest(rootfs, "boot/vmlinuz-*"), newest(rootfs, "boot/initrd.img-*")
	return m, nil
}

// newest returns the last match of a glob inside rootfs, relative to it.
func newest(rootfs, pattern string) string {
	matches, _ := filepath.Glob(filepath.Join(rootfs, pattern))
	if len(matches) == 0 {
		return ""
	}
	sort.Strings(matches)
	rel, _ := filepath.Rel(rootfs, matches[len(matches)-1])
	return "/" + rel
}

func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := regfile.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

// maxAgentBytes bounds the agent binary copied into an image: it is a few
// MiB, so a path to anything else is refused before it fills the image.
const maxAgentBytes = 256 << 20

// installAgent copies the agent into the image when it differs from the
// one there, so a rebuilt vfleet never talks to a stale agent.
func installAgent(img *Image, binary string, progress func(string)) error {
	sum, err := FileSHA256(binary)
	if err != nil {
		return fmt.Errorf("image: agent: %w", err)
	}
	if sum == img.Manifest.AgentSHA256 {
		return nil
	}
	dst := filepath.Join(img.RootFS, AgentPath)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := regfile.CopyFile(binary, dst+".new", 0o755, maxAgentBytes); err != nil {
		return fmt.Errorf("image: install agent: %w", err)
	}
	if err := os.Rename(dst+".new", dst); err != nil {
		return fmt.Errorf("image: install agent: %w", err)
	}
	img.Manifest.AgentSHA256 = sum
	progress(fmt.Sprintf("installed agent %.12s into the image", sum))
	return writeManifest(img.Dir, img.Manifest)
}

// FileSHA256 is the hex sha256 of a file's contents.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// removeStaleBuilds deletes the temporary directories a killed build of
// final left; the caller holds final's lock, so none of them is in use.
func removeStaleBuilds(final string) {
	dir, prefix := filepath.Dir(final), buildDirPrefix(final)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			removeBuildDir(filepath.Join(dir, e.Name()))
		}
	}
}

// removeBuildDir deletes a build directory, first detaching anything the
// builder mounted inside its chroot (/proc, /sys, /dev binds) and did not
// unmount: removing through such a mount would delete the host's own files.
func removeBuildDir(dir string) {
	points, err := mountPointsBelow("/proc", dir)
	if err != nil {
		return // without a mount table it is not safe to remove anything
	}
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return
		}
	}
	os.RemoveAll(dir)
}

// mountPointsBelow lists the mount points strictly below dir in this
// process's mount table, read under procRoot, deepest first.
func mountPointsBelow(procRoot, dir string) ([]string, error) {
	mounts, err := procfs.Mounts(procRoot)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}
