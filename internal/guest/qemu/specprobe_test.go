package qemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/tools"
)

// A VM that may fall back to TCG is never refused, and nothing is looked
// at for it: no image, no probe.
func TestProbeSpecAsksNothingOfAGuestThatMayEmulate(t *testing.T) {
	for _, accel := range []string{"", AccelAuto, AccelTCG} {
		if err := (kind{}).ProbeSpec(context.Background(), guest.Spec{Accel: accel}, guest.Env{RootFS: "/nonexistent/rootfs"}); err != nil {
			t.Errorf("accel %q: %v", accel, err)
		}
	}
}

// accel kvm is refused as not supported where the boot probe's answer
// (here the one this process keeps) is that KVM does not boot a kernel,
// so a scenario's optional group is dropped rather than failing its start.
func TestProbeSpecRefusesKVMWhereItDoesNotBoot(t *testing.T) {
	_, arch, err := archOf("")
	if err != nil {
		t.Fatal(err)
	}
	qemuTool, err := tools.Find(arch.qemu)
	if err != nil {
		t.Skipf("the host's QEMU: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"kernel": "boot/vmlinuz"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := guest.Env{RootFS: filepath.Join(dir, "rootfs")}
	// A user's disk: the probe is asked of vfleet's kernel, and no boot
	// files are made for it.
	spec := guest.Spec{Accel: AccelKVM, Image: "/disk.qcow2"}
	img, err := image.ForRootFS(env.RootFS)
	if err != nil {
		t.Fatal(err)
	}
	memo := [2]string{qemuTool.Path, img.KernelPath}
	kvmProbe.mu.Lock()
	if kvmProbe.done == nil {
		kvmProbe.done = map[[2]string]error{}
	}
	kvmProbe.done[memo] = errors.New("boot a kernel under kvm: no boot within 10 s")
	kvmProbe.mu.Unlock()
	t.Cleanup(func() {
		kvmProbe.mu.Lock()
		delete(kvmProbe.done, memo)
		kvmProbe.mu.Unlock()
	})

	err = (kind{}).ProbeSpec(context.Background(), spec, env)
	if !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), "accel kvm: boot a kernel under kvm: no boot within 10 s") {
		t.Fatalf("KVM that does not boot: %v; want a refusal wrapping guest.ErrNotSupported, with the probe's reason", err)
	}
	kvmProbe.mu.Lock()
	kvmProbe.done[memo] = nil
	kvmProbe.mu.Unlock()
	if err := (kind{}).ProbeSpec(context.Background(), spec, env); err != nil {
		t.Fatalf("KVM that boots: %v", err)
	}
}
