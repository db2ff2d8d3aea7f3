package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload"
)

// Integration tests run under TCG: it works on every host, and KVM is not
// assumed to (nested virtualisation often lacks it).

// TestMicroVMWorkloadOnPinnedVCPUs boots the other machine with two
// pinned vCPUs and a private disk copy, and runs the cpu workload's real
// command once.
func TestMicroVMWorkloadOnPinnedVCPUs(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	g := newVM(t, guest.Spec{Name: "work", Kind: KindName, Runtime: MachineMicroVM, Accel: AccelTCG, VCPUs: 2, Own: guest.Own{fieldDisk: DiskCopy}, PinVCPUs: "0-1"},
		guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Runtime != MachineMicroVM || info.Details["accel"] != AccelTCG || len(strings.Split(info.Details["vcpu_threads"], ",")) != 2 || info.Details["vcpu_pins"] != "0,1" {
		t.Errorf("info = %+v", info)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"nproc"}})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "2" {
		t.Errorf("nproc in the guest: %v %q", err, r.Stdout)
	}
	runCPUWorkload(t, g, 1)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAccelKVM checks the kvm path whatever the host: where KVM boots a
// kernel the guest must come up under it; where it does not (like the
// nested hosts CI runs on) the start must fail naming why, leaving nothing.
func TestAccelKVM(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root := t.TempDir()
	led, err := ledger.Create(root, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	k, _ := guest.Lookup(KindName)
	g, err := k.New(guest.Spec{Name: "kvm", Kind: KindName, Accel: AccelKVM},
		guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := tools.Find("qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	// Probe first: KVM can work on one boot and not the next on a flaky
	// host, and Start reuses this process's answer.
	vmImg, err := image.ForRootFS(img.RootFS)
	if err != nil {
		t.Fatal(err)
	}
	probeErr := kvmUsable(ctx, q, vmImg.KernelPath, filepath.Join(vmImg.Dir, kvmAnswerFile), func(line string) { t.Log(line) })
	err = g.Start(ctx)
	defer g.Stop(ctx)
	if probeErr == nil {
		if err != nil || g.Info().Details["accel"] != AccelKVM {
			t.Fatalf("kvm works here, yet: %v %+v", err, g.Info())
		}
	} else {
		if !errors.Is(err, ErrKVMUnusable) {
			t.Fatalf("kvm unusable (%v), start said: %v", probeErr, err)
		}
		t.Logf("refused as expected: %v", err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}

// newVM makes a VM guest of spec, failing the test on an error.
func newVM(t *testing.T, spec guest.Spec, env guest.Env) guest.Guest {
	t.Helper()
	k, _ := guest.Lookup(KindName)
	g, err := k.New(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// runCPUWorkload runs the cpu workload's real command for a second in g
// and returns its samples; slowdown stretches its time limit, for an
// emulated architecture.
func runCPUWorkload(t *testing.T, g guest.Guest, slowdown int64) []workload.Sample {
	t.Helper()
	w, err := workload.Lookup("cpu")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := w.Command(w.Defaults(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Exec(context.Background(), agent.Request{Argv: cmd.Argv, TimeoutMS: cmd.Timeout.Milliseconds() * slowdown})
	if err != nil || !r.Succeeded() {
		t.Fatalf("cpu workload: %v %+v\n%s", err, r, r.Stderr)
	}
	samples, err := w.Parse(r.Stdout, r.Stderr)
	if err != nil || len(samples) == 0 || samples[0].Value <= 0 {
		t.Fatalf("cpu workload output: %v %v\n%s", err, samples, r.Stdout)
	}
	return samples
}

// startVM starts g, failing the test if it does not start, and logs what
// it says of itself; the caller stops it.
func startVM(t *testing.T, g guest.Guest) guest.Info {
	t.Helper()
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	info := g.Info()
	t.Logf("boot to agent ready: %s (QEMU start to ready %s); details %v", info.BootTime, info.Details["qemu_start_to_ready"], info.Details)
	return info
}

// TestSandboxedQEMU boots a microVM with security sandbox: its QEMU must
// run as the unprivileged user under a seccomp filter, and the guest must
// work as any other.
func TestSandboxedQEMU(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	g := newVM(t, guest.Spec{Name: "sb", Kind: KindName, Runtime: MachineMicroVM, Accel: AccelTCG, Security: guest.SecuritySandbox},
		guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", info.PIDs[0]))
	if err != nil {
		t.Fatal(err)
	}
	wantUID := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", guest.SandboxHostID, guest.SandboxHostID, guest.SandboxHostID, guest.SandboxHostID)
	if !strings.Contains(string(status), wantUID) || !strings.Contains(string(status), "Seccomp:\t2") {
		t.Errorf("sandboxed QEMU's status lacks %q or seccomp mode 2:\n%s", wantUID, status)
	}
	if info.Details["security"] != guest.SecuritySandbox {
		t.Errorf("details = %v", info.Details)
	}
	runCPUWorkload(t, g, 1)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
