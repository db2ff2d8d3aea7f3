package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/regfile"
)

// ErrBadDisk says a path does not hold a VM disk image vfleet can boot.
var ErrBadDisk = errors.New("not a usable VM disk image")

// Disk formats a user's VM disk may have: each guest gets a qcow2
// overlay backed by it, and QEMU backs overlays with either.
var DiskFormats = []string{"qcow2", "raw"}

// minDiskSize is the least a root file system needs.
const minDiskSize = 1 << 20

// UserDisk is a user's VM disk image. Guests never write to it: it is the
// read-only backing file of each guest's own disk.
type UserDisk struct {
	Path        string
	Format      string
	VirtualSize int64
}

// InspectDisk asks qemu-img what the disk at path is. -U lets it look at
// a disk that running guests hold open.
func InspectDisk(ctx context.Context, qemuImg, path string) (UserDisk, error) {
	out, err := exec.CommandContext(ctx, qemuImg, "info", "-U", "--output=json", path).Output()
	if err != nil {
		if ctx.Err() != nil {
			return UserDisk{}, ctx.Err()
		}
		msg := err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return UserDisk{}, fmt.Errorf("%w: QEMU cannot read %s: %s", ErrBadDisk, path, msg)
	}
	d, err := ParseDiskInfo(out)
	if err != nil {
		return UserDisk{}, fmt.Errorf("%w: %s: %v", ErrBadDisk, path, err)
	}
	d.Path = path
	return d, nil
}

// ParseDiskInfo reads `qemu-img info --output=json` and accepts only the
// formats a guest's overlay can be backed by.
func ParseDiskInfo(b []byte) (UserDisk, error) {
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return UserDisk{}, fmt.Errorf("qemu-img info: %w", err)
	}
	known := false
	for _, f := range DiskFormats {
		known = known || info.Format == f
	}
	if !known {
		return UserDisk{}, fmt.Errorf("format %q is not supported (known: %s; convert it with qemu-img convert -O qcow2)", info.Format, strings.Join(DiskFormats, ", "))
	}
	if info.VirtualSize < minDiskSize {
		return UserDisk{}, fmt.Errorf("virtual size is %d bytes: too small to hold a root file system (QEMU reads any file as a raw disk; is this the disk?)", info.VirtualSize)
	}
	return UserDisk{Format: info.Format, VirtualSize: info.VirtualSize}, nil
}

// WriteBesideInitramfs writes the initramfs a user's kernel boots with:
// the user's own initrd, if any, unchanged, followed by a cpio holding the
// agent at initPath, which the kernel runs first (package vminit). The
// kernel unpacks concatenated archives into one file system, later ones
// over earlier ones, and the agent's lone path overwrites nothing of the
// user's.
func WriteBesideInitramfs(dst, agentBinary, userInitrd, initPath string) error {
	agentBin, err := os.ReadFile(agentBinary)
	if err != nil {
		return fmt.Errorf("vm initramfs: agent: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	defer out.Close()
	var n int64
	if userInitrd != "" {
		if n, err = regfile.Copy(out, userInitrd, guest.MaxInitrdBytes); err != nil {
			return fmt.Errorf("vm initramfs: %w", err)
		}
	}
	// The kernel looks for the next archive's magic only at an offset
	// that is a multiple of 4, skipping zeros; 512 keeps it simple.
	pad := (512 - n%512) % 512
	var buf bytes.Buffer
	buf.Write(make([]byte, pad))
	w := NewCPIOWriter(&buf)
	if userInitrd == "" {
		// The kernel opens /dev/console for the first process before
		// anything is mounted; a user's initrd has its own.
		w.Dir("dev", 0o755)
		w.CharDev("dev/console", 0o600, 5, 1)
	}
	rel := strings.TrimPrefix(initPath, "/")
	w.Dir(filepath.Dir(rel), 0o755)
	w.File(rel, 0o755, agentBin)
	if err := w.Close(); err != nil {
		return err
	}
	if _, err := out.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("vm initramfs: %w", err)
	}
	return out.Close()
}

// maxBackingDepth bounds a qcow2 backing chain: a loop (a disk backed by
// itself through others) ends here instead of never.
const maxBackingDepth = 16

// BackingChain lists the files a qcow2 disk at path is backed by, nearest
// first, from each qcow2 header (QEMU resolves a relative name from the
// directory of the disk that names it); a disk that is not qcow2 has no
// backing file. A backing that is not a plain file name (json:, a URL)
// is refused: what it reads could not be checked.
func BackingChain(path string) ([]string, error) {
	var chain []string
	for range maxBackingDepth {
		next, err := qcow2Backing(path)
		if err != nil || next == "" {
			return chain, err
		}
		chain = append(chain, next)
		path = next
	}
	return nil, fmt.Errorf("%w: %s: a backing chain over %d files deep", ErrBadDisk, chain[0], maxBackingDepth)
}

// qcow2Backing reads the backing file a qcow2 header names: a big-endian
// 64-bit offset at byte 8 and a 32-bit length at byte 16 (at most 1023
// bytes, as QEMU allows).
func qcow2Backing(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != "QFI\xfb" {
		return "", nil // shorter than a qcow2 header, or not qcow2: raw
	}
	off, size := binary.BigEndian.Uint64(h[8:16]), binary.BigEndian.Uint32(h[16:20])
	if off == 0 || size == 0 {
		return "", nil
	}
	if size > 1023 {
		return "", fmt.Errorf("%w: %s: a backing file name of %d bytes (at most 1023)", ErrBadDisk, path, size)
	}
	name := make([]byte, size)
	if _, err := f.ReadAt(name, int64(min(off, math.MaxInt64))); err != nil {
		return "", fmt.Errorf("%w: %s: backing file name: %v", ErrBadDisk, path, err)
	}
	backing := string(name)
	if strings.HasPrefix(backing, "json:") || strings.Contains(backing, "://") {
		return "", fmt.Errorf("%w: %s: backing %q is not a file", ErrBadDisk, path, backing)
	}
	if !filepath.IsAbs(backing) {
		backing = filepath.Join(filepath.Dir(path), backing)
	}
	return backing, nil
}

// besideFormat changes whenever WriteBesideInitramfs writes something
// else for the same agent and initrd, so that kept ones are not reused.
const besideFormat = 1

// besideMu serialises EnsureBesideInitramfs within a process, so that a
// fleet's guests starting together write each initramfs once.
var besideMu sync.Mutex

// EnsureBesideInitramfs returns WriteBesideInitramfs's initramfs of
// agentBinary and userInitrd (empty for none), made once per contents of
// the two in dir, where guests share it: QEMU only reads it, and a copy
// per guest of a user's initrd came to 1.5 GB for 100 guests. It is
// readable by all, for a sandboxed QEMU, unless the user's initrd is not:
// root may boot a guest from a file others must not read, and its copy
// must not become readable where the original was not.
func EnsureBesideInitramfs(dir, agentBinary, userInitrd, initPath string) (string, error) {
	besideMu.Lock()
	defer besideMu.Unlock()
	agentSum, err := contentSum(agentBinary)
	if err != nil {
		return "", fmt.Errorf("vm initramfs: agent: %w", err)
	}
	initrdSum, mode := "none", os.FileMode(0o644)
	if userInitrd != "" {
		if initrdSum, err = contentSum(userInitrd); err != nil {
			return "", fmt.Errorf("vm initramfs: %w", err)
		}
		st, err := os.Stat(userInitrd)
		if err != nil {
			return "", fmt.Errorf("vm initramfs: %w", err)
		}
		if st.Mode().Perm()&0o004 == 0 {
			mode = 0o600
		}
	}
	key := sha256.Sum256(fmt.Appendf(nil, "%d\n%s\n%s\n%s\n%v\n", besideFormat, agentSum, initrdSum, initPath, mode))
	dst := filepath.Join(dir, hex.EncodeToString(key[:12])+".img")
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("vm initramfs: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".partial-")
	if err != nil {
		return "", fmt.Errorf("vm initramfs: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // fails once renamed
	if err := WriteBesideInitramfs(tmp.Name(), agentBinary, userInitrd, initPath); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return "", fmt.Errorf("vm initramfs: %w", err)
	}
	// Another vfleet may rename the same bytes into place meanwhile.
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("vm initramfs: %w", err)
	}
	return dst, nil
}

// sums remembers contentSum's answers by a file's identity, so that the
// hundred guests of a fleet hash the agent and initrd (tens of MB) once.
var sums = map[fileIdentity]string{}

type fileIdentity struct {
	path        string
	dev, ino    uint64
	size, mtime int64
}

// contentSum is FileSHA256 of path, remembered while the file is the
// same (device, inode, size and modification time); the caller holds
// besideMu.
func contentSum(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	id := fileIdentity{path: path, dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}
	if sum, ok := sums[id]; ok {
		return sum, nil
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return "", err
	}
	sums[id] = sum
	return sum, nil
}
