package doctor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/testutil"
)

func TestWriteAlignsAndCounts(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []Result{
		{Name: "root", Status: OK, Detail: "running as root"},
		{Name: "runtime crun", Status: Fail, Detail: "crun 1.8.1 does not start a container: hybrid"},
		{Name: "QEMU", Status: Missing, Detail: "qemu-system-x86_64 not found", Fix: "apt-get install qemu-system-x86"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "OK       root          running as root\n" +
		"FAIL     runtime crun  crun 1.8.1 does not start a container: hybrid\n" +
		"MISSING  QEMU          qemu-system-x86_64 not found\n" +
		"                       → apt-get install qemu-system-x86\n" +
		"\n1 ok, 0 warnings, 1 missing, 1 failing, 0 skipped\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestRunKeepsOrderAndBoundsEachCheck(t *testing.T) {
	checks := []Check{
		{Name: "slow", Timeout: 50 * time.Millisecond, Run: func(ctx context.Context) Result {
			<-ctx.Done()
			return Result{Status: Fail, Detail: "timed out"}
		}},
		{Name: "fast", Run: func(context.Context) Result { return Result{Status: OK} }},
	}
	var seen []string
	results := Run(context.Background(), checks, func(r Result) { seen = append(seen, r.Name) })
	if results[0].Name != "slow" || results[1].Name != "fast" || len(seen) != 2 {
		t.Fatalf("results = %+v, progress = %v", results, seen)
	}
}

func TestRuntimeCheckReportsTheProbe(t *testing.T) {
	testutil.RequiresTool(t, "runc", "runc")
	fail := runtimeCheck("runc", func(context.Context, string) error { return errors.New("cgroups exploded") })(context.Background())
	if fail.Status != Fail || !strings.Contains(fail.Detail, "cgroups exploded") {
		t.Fatalf("failing probe: %+v", fail)
	}
	ok := runtimeCheck("runc", func(context.Context, string) error { return nil })(context.Background())
	if ok.Status != OK {
		t.Fatalf("working probe: %+v", ok)
	}
	t.Setenv("PATH", t.TempDir())
	missing := runtimeCheck("runc", nil)(context.Background())
	if missing.Status != Missing || missing.Fix != "apt-get install runc" {
		t.Fatalf("missing runtime: %+v", missing)
	}
}

func TestImageTools(t *testing.T) {
	if r := checkImageTools(nil); r.Status != Missing || r.Fix != "vfleet image build" {
		t.Fatalf("no image: %+v", r)
	}
	all := map[string]string{"stress-ng": "1", "sysbench": "1", "fio": "1", "iperf3": "1", "sockperf": "1", "rt-tests": "2.4"}
	if r := checkImageTools(all); r.Status != OK || !strings.Contains(r.Detail, "cyclictest 2.4") {
		t.Fatalf("full image: %+v", r)
	}
	delete(all, "fio")
	if r := checkImageTools(all); r.Status != Missing || !strings.Contains(r.Detail, "fio") {
		t.Fatalf("image without fio: %+v", r)
	}
}

func TestProbeArgv(t *testing.T) {
	got := ProbeArgv("kvm", "/k")
	want := []string{"-accel", "kvm", "-cpu", "host", "-m", "256M", "-smp", "1", "-nodefaults", "-no-reboot", "-display", "none",
		"-serial", "stdio", "-kernel", "/k", "-append", "console=ttyS0 panic=-1 loglevel=4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("argv:\n got %q\nwant %q", got, want)
	}
	if ProbeArgv("tcg", "/k")[3] != "max" {
		t.Fatal("TCG must emulate the richest CPU model")
	}
}

func TestNoKernelIsSkippedNotFailed(t *testing.T) {
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	if r := checkAccel(context.Background(), "tcg", "", time.Second); r.Status != Skip || r.Fix != "vfleet image build" {
		t.Fatalf("%+v", r)
	}
}

// TestBootProbes boots the guest image's kernel for real: TCG must boot it;
// KVM must give an honest answer within its timeout either way.
func TestBootProbes(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	if img.KernelPath == "" {
		t.Fatal("the default image must carry a guest kernel")
	}
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	r := checkAccel(context.Background(), "tcg", img.KernelPath, 90*time.Second)
	if r.Status != OK {
		t.Fatalf("TCG did not boot the guest kernel: %+v", r)
	}
	t.Logf("TCG: %s", r.Detail)
	began := time.Now()
	r = checkAccel(context.Background(), "kvm", img.KernelPath, 10*time.Second)
	if time.Since(began) > 20*time.Second {
		t.Fatalf("KVM probe overran its timeout: %s", time.Since(began))
	}
	if r.Status == Fail && !strings.Contains(r.Detail, "TCG") {
		t.Errorf("a failing KVM probe must say VMs fall back to TCG: %+v", r)
	}
	t.Logf("KVM: %s %s", r.Status, r.Detail)
	if out, _ := exec.Command("pgrep", "-f", "qemu-system-x86_64 -accel").Output(); len(out) > 0 {
		t.Fatalf("QEMU left running: %s", out)
	}
}

func TestBPFAndNetnsOnThisHost(t *testing.T) {
	testutil.RequiresRoot(t)
	if r := checkNetns(context.Background()); r.Status != OK {
		t.Fatalf("netns: %+v", r)
	}
	if r := checkBPF(context.Background()); r.Status != OK {
		t.Fatalf("BPF: %+v", r)
	}
	if r := checkRoot(context.Background()); r.Status != OK || os.Geteuid() != 0 {
		t.Fatalf("root: %+v", r)
	}
}
