package qemu

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestArm64GuestUnderEmulation boots vfleet's arm64 image on this host's
// QEMU for aarch64, which can only emulate it: the agent answers from an
// aarch64 kernel, the record says emulation, and the cpu workload runs.
func TestArm64GuestUnderEmulation(t *testing.T) {
	if image.HostArch == "arm64" {
		t.Skip("the host is arm64: its own VMs are the native ones")
	}
	if os.Getenv("VFLEET_TEST_ARM64") == "" {
		t.Skip("opt-in: builds vfleet's arm64 image under qemu-user emulation first (7 minutes on a 2-core host, once per machine); run make arm64, or set VFLEET_TEST_ARM64=1")
	}
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-aarch64", "qemu-system-arm")
	img := testutil.ImageFor(t, "arm64")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	g := newVM(t, guest.Spec{Name: "arm", Kind: KindName, Arch: "arm64"},
		guest.Env{RunID: "t", RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Runtime != MachineVirt || info.Details["arch"] != "arm64" || info.Details["accel"] != AccelTCG || !strings.HasPrefix(info.Details["accel_choice"], "emulation") {
		t.Errorf("info = %+v", info)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"uname", "-m"}})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "aarch64" {
		t.Errorf("uname -m in the guest: %v %q", err, r.Stdout)
	}
	t.Logf("cpu under arm64 emulation: %+v", runCPUWorkload(t, g, 10))
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
