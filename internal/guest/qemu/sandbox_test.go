package qemu

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

func TestSandboxArgvAndRefusals(t *testing.T) {
	a := qemuArgv(launchConfig{Name: "g", Machine: MachineMicroVM, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256, Sandbox: true})
	if i := slices.Index(a, "-sandbox"); i < 0 || a[i+1] != sandboxFilter {
		t.Errorf("sandboxed argv lacks -sandbox %s: %v", sandboxFilter, a)
	}
	if slices.Contains(qemuArgv(launchConfig{Name: "g", Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256}), "-sandbox") {
		t.Error("an unconfined QEMU got a sandbox")
	}
	_, err := (kind{}).New(guest.Spec{Name: "c", Kind: KindName, Launch: LaunchClone, Security: guest.SecuritySandbox}, guest.Env{})
	if err == nil || !strings.Contains(err.Error(), "use launch: boot") {
		t.Errorf("a sandboxed clone: %v", err)
	}
	_, err = (kind{}).New(guest.Spec{Name: "c", Kind: KindName, Security: guest.SecurityDefault}, guest.Env{})
	if err == nil || !strings.Contains(err.Error(), "allowed: unconfined, sandbox") {
		t.Errorf("a container's profile on a VM: %v", err)
	}
}

// The sandboxed QEMU's user gets its guest's directory and can reach what
// it reads; a directory outside vfleet's own that it cannot search is
// named, not changed.
func TestOpenToSandbox(t *testing.T) {
	// The test's own directories above vfleet's are searchable, as /var
	// and /var/lib are on a host.
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	testRoot := filepath.Join(top, "vfleet")
	own := filepath.Join(testRoot, "state")
	guestDir := filepath.Join(own, "runs", "r1", "vm")
	images := filepath.Join(own, "images", "abc")
	for _, d := range []string{guestDir, images} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(images, "base.qcow2")
	if err := os.WriteFile(base, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guestDir, "disk.qcow2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(testRoot, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := openToSandbox(guestDir, []string{testRoot}, []string{base}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{testRoot, own, filepath.Join(own, "runs"), images} {
		if st, _ := os.Stat(d); st.Mode().Perm()&0o001 == 0 || st.Mode().Perm()&0o004 != 0 {
			t.Errorf("%s is %v: want searchable, not listable, by others", d, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(filepath.Join(guestDir, "disk.qcow2")); st.Sys().(*syscall.Stat_t).Uid != guest.SandboxHostID {
		t.Errorf("the guest's disk belongs to %d, not QEMU's user", st.Sys().(*syscall.Stat_t).Uid)
	}

	private := filepath.Join(top, "private")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(private, "vmlinuz")
	if err := os.WriteFile(kernel, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := openToSandbox(guestDir, []string{testRoot}, []string{kernel})
	if err == nil || !strings.Contains(err.Error(), "cannot reach into "+private) {
		t.Errorf("an unreachable user file: %v", err)
	}
	if st, _ := os.Stat(private); st.Mode().Perm() != 0o700 {
		t.Errorf("a directory outside vfleet's own was changed to %v", st.Mode().Perm())
	}
}

// What root copies for a sandboxed guest (the user's initrd) and what
// QEMU opens through the guest's disk (its backing chain) must be
// readable by QEMU's user, as the kernel is: else root's copy or QEMU's
// own open would hand that user a file it may not read.
func TestSandboxReadsTheInitrdAndTheBackingChain(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	guestDir := filepath.Join(top, "state", "vm")
	if err := os.MkdirAll(guestDir, 0o700); err != nil {
		t.Fatal(err)
	}
	kernel, initrd := filepath.Join(top, "vmlinuz"), filepath.Join(top, "initrd.img")
	backing, disk := filepath.Join(top, "backing.raw"), filepath.Join(top, "disk.qcow2")
	for _, f := range []string{kernel, initrd} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, argv := range [][]string{{"create", "-q", "-f", "raw", backing, "1M"}, {"create", "-q", "-f", "qcow2", "-F", "raw", "-b", backing, disk}} {
		if out, err := exec.Command(qemuImg, argv...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", argv, err, out)
		}
	}
	open := func() error {
		reads, err := sandboxReads(launchConfig{Kernel: kernel}, initrd, "", disk)
		if err != nil {
			return err
		}
		return openToSandbox(guestDir, []string{filepath.Join(top, "state")}, reads)
	}
	for _, f := range []string{initrd, backing} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := open(); err == nil || !strings.Contains(err.Error(), "cannot read "+f) {
			t.Errorf("%s unreadable by QEMU's user: %v", filepath.Base(f), err)
		}
		if st, _ := os.Stat(guestDir); st.Sys().(*syscall.Stat_t).Uid == guest.SandboxHostID {
			t.Errorf("%s unreadable: the guest's directory was given to QEMU's user all the same", filepath.Base(f))
		}
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := open(); err != nil {
		t.Errorf("all readable: %v", err)
	}
}
