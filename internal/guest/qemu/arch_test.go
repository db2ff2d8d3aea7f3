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
	img := emulatedArm64Image(t)
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
	checkArm64Guest(t, g)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// emulatedArm64Image is vfleet's arm64 image, for a test that emulates
// an arm64 guest on this host; the test is skipped where that is not
// what it would do, or not asked for.
func emulatedArm64Image(t *testing.T) *image.Image {
	t.Helper()
	if image.HostArch == "arm64" {
		t.Skip("the host is arm64: its own VMs are the native ones")
	}
	if os.Getenv("VFLEET_TEST_ARM64") == "" {
		t.Skip("opt-in: builds vfleet's arm64 image under qemu-user emulation first (7 minutes on a 2-core host, once per machine); run make arm64, or set VFLEET_TEST_ARM64=1")
	}
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-aarch64", "qemu-system-arm")
	return testutil.ImageFor(t, "arm64")
}

// checkArm64Guest: the agent answers from an aarch64 kernel and the cpu
// workload runs.
func checkArm64Guest(t *testing.T, g guest.Guest) {
	t.Helper()
	r, err := g.Exec(context.Background(), agent.Request{Argv: []string{"uname", "-m"}})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "aarch64" {
		t.Errorf("uname -m in the guest: %v %q", err, r.Stdout)
	}
	t.Logf("cpu under arm64 emulation: %+v", runCPUWorkload(t, g, 10))
}
