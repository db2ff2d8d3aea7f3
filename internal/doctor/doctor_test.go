package doctor

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/ksm"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestWriteGolden(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []Result{
		{Name: "root", Status: OK, Detail: "running as root"},
		{Name: "runtime crun", Status: Fail, Detail: "crun 1.8.1 does not start a container: cgroup layout",
			Fix: "cgroups here are hybrid, which crun may reject: use runc on this host"},
		{Name: "QEMU", Status: Missing, Detail: "qemu-system-x86_64 not found in PATH", Fix: "apt-get install qemu-system-x86"},
		{Name: "KVM", Status: Skip, Detail: "not probed: no guest kernel"},
		{Name: "cgroups", Status: Warn, Detail: "v1; controllers missing: memory"},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "write.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestRunKeepsOrderAndBoundsEachCheck(t *testing.T) {
	checks := []Check{
		{Name: "slow", Timeout: 50 * time.Millisecond, Run: func(ctx context.Context) Result {
			<-ctx.Done()
			return Result{Status: Fail, Detail: ctx.Err().Error()}
		}},
		{Name: "fast", Run: func(ctx context.Context) Result {
			if _, ok := ctx.Deadline(); !ok {
				return Result{Status: Fail, Detail: "no default timeout"}
			}
			return Result{Name: "overridden", Status: OK}
		}},
	}
	var seen []string
	results := Run(context.Background(), checks, func(r Result) { seen = append(seen, r.Name) })
	want := []Result{
		{Name: "slow", Status: Fail, Detail: context.DeadlineExceeded.Error()},
		{Name: "fast", Status: OK},
	}
	if !reflect.DeepEqual(results, want) {
		t.Fatalf("results = %+v, want %+v", results, want)
	}
	if len(seen) != 2 {
		t.Fatalf("progress saw %v, want both checks", seen)
	}
}

func TestChecksListEverything(t *testing.T) {
	var names []string
	for _, c := range Checks(Options{}, kindChecks{RuntimeCheck(Options{}, "runc", nil), ToolCheck("QEMU", "qemu-system-x86_64", "runs VM guests")}) {
		if c.Run == nil {
			t.Errorf("%s has no Run", c.Name)
		}
		names = append(names, c.Name)
	}
	want := []string{"root", "cgroups", "overlayfs", "network namespaces", "BPF", "XDP native on veth", "Open vSwitch", "passt", "IOMMU and vfio", "image builder", "C compiler amd64", "C compiler arm64",
		"runtime runc", "QEMU", "KSM", "latency tracers", "measuring tools"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("checks %q, want %q", names, want)
	}
}

// kindChecks stands in for a guest kind that brings checks of its own.
type kindChecks []Check

func (k kindChecks) DoctorChecks(Options) []Check { return k }

func TestRoot(t *testing.T) {
	if r := checkRoot(0); r.Status != OK {
		t.Errorf("root: %+v", r)
	}
	if r := checkRoot(1000); r.Status != Fail || r.Fix == "" {
		t.Errorf("uid 1000: %+v", r)
	}
}

func TestCgroupsOnRecordedTrees(t *testing.T) {
	for _, tc := range []struct {
		tree   string
		status Status
		detail string
	}{
		{"cgroup-v2", OK, "v2 (unified hierarchy); controllers cpu, cpuset, memory"},
		{"cgroup-hybrid", OK, "hybrid (v1 controllers plus a v2 hierarchy at unified/); controllers cpu, cpuset, memory"},
		{"cgroup-v1-nomem", Warn, "v1; controllers missing: cpuset, memory"},
	} {
		r := checkCgroups(filepath.Join("testdata", tc.tree))
		if r.Status != tc.status || r.Detail != tc.detail {
			t.Errorf("%s: got %s %q, want %s %q", tc.tree, r.Status, r.Detail, tc.status, tc.detail)
		}
	}
	if r := checkCgroups(t.TempDir()); r.Status != Fail {
		t.Errorf("no cgroup tree: %+v", r)
	}
}

func TestOverlayOnRecordedProcFilesystems(t *testing.T) {
	if r := checkOverlay(filepath.Join("testdata", "proc")); r.Status != OK {
		t.Errorf("recorded host: %+v", r)
	}
	if r := checkOverlay(t.TempDir()); r.Status != Fail {
		t.Errorf("unreadable file: %+v", r)
	}
}

// fakeRuntime puts an executable named name on a fresh PATH that prints
// banner for --version.
func fakeRuntime(t *testing.T, name, banner string) {
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' '%s'\n", banner)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

// Runtimes stand for those a guest kind registers with internal/tools
// (the container kind's runc, crun, runsc and kata-runtime): one Debian
// ships and one it does not.
const (
	testRuntime         = "doctor-test-runtime"
	testUpstreamRuntime = "doctor-test-upstream"
)

func init() {
	tools.Register(tools.Spec{Name: testRuntime, Package: "doctor-test-pkg", Banner: regexp.MustCompile(`(?m)^doctor-test-runtime version (\S+)`)})
	tools.Register(tools.Spec{Name: testUpstreamRuntime, Install: tools.Upstream("Doctor Test", "its releases"), Banner: regexp.MustCompile(`(?m)^upstream (\S+)`)})
}

func TestRuntimeCheckWithFakeProbes(t *testing.T) {
	fakeRuntime(t, testRuntime, "doctor-test-runtime version 9.9.9")
	hybrid := func() string { return hostinfo.CgroupHybrid }
	v2 := func() string { return hostinfo.CgroupV2 }
	ctx := context.Background()

	probeErr := errors.New("crun: cannot set up cgroup: unified hierarchy expected")
	failing := func(context.Context, string) error { return probeErr }
	r := runtimeCheck(testRuntime, failing, hybrid)(ctx)
	if r.Status != Fail || !strings.Contains(r.Detail, testRuntime+" 9.9.9") || !strings.Contains(r.Detail, probeErr.Error()) ||
		!strings.Contains(r.Fix, "hybrid") {
		t.Errorf("failing probe on a hybrid host: %+v", r)
	}
	if r := runtimeCheck(testRuntime, failing, v2)(ctx); r.Status != Fail || r.Fix != "" {
		t.Errorf("failing probe on a v2 host must not blame the cgroup layout: %+v", r)
	}

	var probed string
	working := func(_ context.Context, rt string) error { probed = rt; return nil }
	if r := runtimeCheck(testRuntime, working, hybrid)(ctx); r.Status != OK || probed != testRuntime {
		t.Errorf("working probe: %+v (probed %q)", r, probed)
	}
	if r := runtimeCheck(testRuntime, nil, hybrid)(ctx); r.Status != Skip {
		t.Errorf("no probe wired: %+v", r)
	}
	t.Setenv("PATH", t.TempDir())
	for rt, fix := range map[string]string{testRuntime: "apt-get install doctor-test-pkg", testUpstreamRuntime: "Doctor Test is not packaged in Debian"} {
		r := runtimeCheck(rt, working, hybrid)(ctx)
		if r.Status != Missing || !strings.Contains(r.Fix, fix) || !strings.Contains(r.Detail, "not found in PATH") {
			t.Errorf("missing %s: %+v", rt, r)
		}
	}
}

func TestToolCheck(t *testing.T) {
	fakeRuntime(t, "qemu-img", "qemu-img version 1.2.3 (Debian)")
	if r := toolCheck("qemu-img", "makes disks")(context.Background()); r.Status != OK || !strings.HasPrefix(r.Detail, "qemu-img 1.2.3 at ") {
		t.Errorf("present: %+v", r)
	}
	r := toolCheck("qemu-system-x86_64", "runs VM guests")(context.Background())
	if r.Status != Missing || r.Fix != "apt-get install qemu-system-x86" || !strings.HasSuffix(r.Detail, "(runs VM guests)") {
		t.Errorf("missing: %+v", r)
	}
}

// fakeOVS puts every Open vSwitch program on a fresh PATH, printing
// its banner with the version given for it.
func fakeOVS(t *testing.T, versions map[string]string) {
	dir := t.TempDir()
	for name, v := range versions {
		script := fmt.Sprintf("#!/bin/sh\necho '%s (Open vSwitch) %s'\n", name, v)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
}

func TestOVSCheck(t *testing.T) {
	ctx := context.Background()
	userspace := func() netpath.OVSDatapath {
		return netpath.OVSDatapath{Type: "netdev", Why: "userspace: no openvswitch kernel module"}
	}
	kernel := func() netpath.OVSDatapath {
		return netpath.OVSDatapath{Type: "system", Why: "kernel: the openvswitch module"}
	}
	all := map[string]string{"ovs-vswitchd": "3.1.0", "ovsdb-server": "3.1.0", "ovsdb-tool": "3.1.0", "ovs-vsctl": "3.1.0"}
	fakeOVS(t, all)
	r := checkOVS(ctx, userspace)
	if r.Status != Warn || r.Detail != "Open vSwitch 3.1.0 (ovs-vswitchd, ovsdb-server, ovsdb-tool, ovs-vsctl); "+
		"the ovs path's bridge would use datapath netdev (userspace: no openvswitch kernel module)" || !strings.Contains(r.Fix, "openvswitch module") {
		t.Errorf("userspace datapath: %+v", r)
	}
	if r := checkOVS(ctx, kernel); r.Status != OK || !strings.HasSuffix(r.Detail, "datapath system (kernel: the openvswitch module)") || r.Fix != "" {
		t.Errorf("kernel datapath: %+v", r)
	}
	all["ovs-vsctl"] = "3.2.0"
	fakeOVS(t, all)
	if r := checkOVS(ctx, kernel); !strings.HasPrefix(r.Detail, "Open vSwitch: ovs-vswitchd 3.1.0, ovsdb-server 3.1.0, ovsdb-tool 3.1.0, ovs-vsctl 3.2.0;") {
		t.Errorf("mixed versions: %+v", r)
	}
	delete(all, "ovsdb-server")
	fakeOVS(t, all)
	if r := checkOVS(ctx, kernel); r.Status != Missing || r.Fix != "apt-get install openvswitch-switch" || !strings.Contains(r.Detail, "ovsdb-server") {
		t.Errorf("without ovsdb-server: %+v", r)
	}
}

func TestImageTools(t *testing.T) {
	if r := checkImageTools(nil); r.Status != Missing || r.Fix != "vfleet image build" {
		t.Fatalf("no image: %+v", r)
	}
	all := map[string]string{"stress-ng": "0.15", "sysbench": "1.0", "fio": "3.33", "iperf3": "3.12", "sockperf": "3.10", "rt-tests": "2.4", "rtla": "6.1", "lame": "3.100"}
	r := checkImageTools(all)
	want := "in the guest image: cyclictest 2.4, fio 3.33, iperf3 3.12, lame 3.100, rtla 6.1, sockperf 3.10, stress-ng 0.15, sysbench 1.0"
	if r.Status != OK || r.Detail != want {
		t.Fatalf("full image: %+v", r)
	}
	delete(all, "rt-tests")
	if r := checkImageTools(all); r.Status != Missing || !strings.Contains(r.Detail, "cyclictest (Debian package rt-tests)") {
		t.Fatalf("image without rt-tests: %+v", r)
	}
}

// Doctor looks for every program a registered workload runs from a
// Debian package: an image without one is missing it.
func TestImageToolsAreEveryWorkloadsPrograms(t *testing.T) {
	all := map[string]string{}
	for _, name := range workload.Names() {
		w, _ := workload.Lookup(name)
		for _, p := range w.Programs() {
			if p.Package != "" {
				all[p.Package] = "1.0"
			}
		}
	}
	if r := checkImageTools(all); r.Status != OK {
		t.Fatalf("image with every workload's packages: %+v", r)
	}
	for _, name := range workload.Names() {
		w, _ := workload.Lookup(name)
		for _, p := range w.Programs() {
			if p.Package == "" {
				continue
			}
			without := maps.Clone(all)
			delete(without, p.Package)
			r := checkImageTools(without)
			if r.Status != Missing || !strings.Contains(r.Detail, p.Name+" (Debian package "+p.Package+")") {
				t.Errorf("image without %s's %s: %+v", name, p.Package, r)
			}
		}
	}
}

func TestBootArgv(t *testing.T) {
	want := []string{"-accel", "kvm", "-cpu", "host", "-m", "256M", "-smp", "1", "-nodefaults", "-no-reboot",
		"-display", "none", "-serial", "stdio", "-kernel", "/boot/vmlinuz", "-append", "console=ttyS0 panic=-1 loglevel=4"}
	if got := bootArgv("/usr/bin/qemu-system-x86_64", "kvm", "/boot/vmlinuz"); !reflect.DeepEqual(got, want) {
		t.Fatalf("kvm argv:\n got %q\nwant %q", got, want)
	}
	want[1], want[3] = "tcg", "max"
	if got := bootArgv("/usr/bin/qemu-system-x86_64", "tcg", "/boot/vmlinuz"); !reflect.DeepEqual(got, want) {
		t.Fatalf("tcg argv:\n got %q\nwant %q", got, want)
	}
	// An arm64 host's KVM is probed on virt, with its own console.
	arm := strings.Join(bootArgv("/usr/bin/qemu-system-aarch64", "kvm", "/boot/vmlinuz"), " ")
	if !strings.HasPrefix(arm, "-machine virt -accel kvm -cpu host") || !strings.Contains(arm, "console=ttyAMA0") {
		t.Fatalf("arm64 kvm argv: %s", arm)
	}
}

func TestAccelResult(t *testing.T) {
	kvm := accelProbe{accel: "kvm", timeout: 10 * time.Second, kvmDevice: "/dev/kvm"}
	tcg := accelProbe{accel: "tcg", timeout: 60 * time.Second}
	timedOut := fmt.Errorf("%w: no boot within 10 s", errBootTimeout)
	exited := fmt.Errorf("%w (exit status 1): qemu-system-x86_64: failed to initialize kvm: Permission denied", errQEMUExited)
	for _, tc := range []struct {
		p    accelProbe
		took time.Duration
		err  error
		want Result
	}{
		{kvm, 1800 * time.Millisecond, nil, Result{Status: OK, Detail: "works (booted in 1.8 s)"}},
		{tcg, 21 * time.Second, nil, Result{Status: OK, Detail: "works (booted in 21 s)"}},
		{kvm, 0, timedOut, Result{Status: Fail, Detail: "/dev/kvm present but a guest kernel did not boot within 10 s " +
			"(e.g. nested virtualisation without support); VMs will run under TCG emulation"}},
		{kvm, 0, exited, Result{Status: Fail, Detail: "/dev/kvm present but " + exited.Error() + "; VMs will run under TCG emulation"}},
		{tcg, 0, timedOut, Result{Status: Fail, Detail: "a guest kernel did not boot within 60 s under emulation; VM guests cannot run on this host"}},
	} {
		if got := accelResult(tc.p, tc.took, tc.err); got != tc.want {
			t.Errorf("%s, %v:\n got %+v\nwant %+v", tc.p.accel, tc.err, got, tc.want)
		}
	}
}

func TestAccelNotProbed(t *testing.T) {
	ctx := context.Background()
	r := checkAccel(ctx, accelProbe{accel: "kvm", kernel: "/boot/vmlinuz", timeout: time.Second, kvmDevice: filepath.Join(t.TempDir(), "kvm")})
	if r.Status != Missing || !strings.Contains(r.Detail, "TCG") {
		t.Errorf("no KVM device: %+v", r)
	}
	fakeRuntime(t, "qemu-system-x86_64", "QEMU emulator version 9.9.9")
	r = checkAccel(ctx, accelProbe{accel: "tcg", timeout: time.Second})
	if r.Status != Skip || r.Detail != "not probed: no guest kernel (run `vfleet image build`)" || r.Fix != "vfleet image build" {
		t.Errorf("no kernel: %+v", r)
	}
	t.Setenv("PATH", t.TempDir())
	r = checkAccel(ctx, accelProbe{accel: "tcg", kernel: "/boot/vmlinuz", timeout: time.Second})
	if r.Status != Skip || r.Fix != "apt-get install qemu-system-x86" {
		t.Errorf("no QEMU: %+v", r)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Second: "10 s", 2345 * time.Millisecond: "2.3 s", 60 * time.Second: "60 s"} {
		if got := seconds(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}

func TestQEMUReasonOnRecordedAbort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "qemu-kvm-abort.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := qemuReason(string(b)), "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := qemuReason("warning: a\nqemu-system-x86_64: -kernel /x: No such file\n"); got != "qemu-system-x86_64: -kernel /x: No such file" {
		t.Errorf("no error line: got %q", got)
	}
}

// fakeQEMU writes an executable that stands in for QEMU and returns its
// path and the file where it records the pid of a child it leaves in its
// process group, as a real QEMU's children would: only killing the whole
// group kills that child.
func fakeQEMU(t *testing.T, body string) (path, childPidFile string) {
	dir := t.TempDir()
	path, childPidFile = filepath.Join(dir, "qemu-system-x86_64"), filepath.Join(dir, "child.pid")
	script := "#!/bin/sh\nsleep 300 &\necho $! > " + childPidFile + "\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, childPidFile
}

// alive reports whether pid runs and is not a zombie.
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

func TestBootKernelAlwaysKillsQEMU(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       error // nil: booted
	}{
		{"boots and lingers", "echo 'Kernel panic - not syncing: VFS: Unable to mount root fs'; exec sleep 300", nil},
		{"hangs", "exec sleep 300", errBootTimeout},
		{"fails at once", "echo 'qemu-system-x86_64: error: no KVM' >&2; exit 1", errQEMUExited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.TakeSnapshot(t)
			qemu, childPidFile := fakeQEMU(t, tc.body)
			returned := make(chan error, 1)
			go func() {
				_, err := bootKernel(context.Background(), qemu, "kvm", "/boot/vmlinuz", 500*time.Millisecond)
				returned <- err
			}()
			var err error
			select {
			case err = <-returned:
			case <-time.After(time.Minute):
				// A hang, not a slow run: the fake only ends when killed.
				t.Fatal("bootKernel never returned: QEMU's process group was not killed")
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			testutil.CheckLeaks(t, before)
			child, rerr := os.ReadFile(childPidFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			// SIGKILL is delivered when the child next runs, maybe on the
			// other CPU a moment after bootKernel returned: only a child
			// still running after that is a survivor.
			pid := strings.TrimSpace(string(child))
			for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("QEMU's process group survived: pid %s still runs", pid)
			}
		})
	}
}

func TestVhostNetCheck(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "vhost-net")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for device, want := range map[string]Status{dev: OK, filepath.Join(t.TempDir(), "absent"): Warn, "": Skip} {
		if r := checkVhostNet(device); r.Status != want || (want == Warn && !strings.Contains(r.Fix, "vhost_net")) {
			t.Errorf("%q: %+v, want %s", device, r, want)
		}
	}
}

func TestKSMCheck(t *testing.T) {
	dir := t.TempDir()
	for run, want := range map[string]string{"0": "available and off", "1": "on already"} {
		if err := os.WriteFile(filepath.Join(dir, "run"), []byte(run+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := checkKSM(ksm.Host{Dir: dir}); r.Status != OK || !strings.Contains(r.Detail, want) {
			t.Errorf("run=%s: %+v, want OK saying %q", run, r, want)
		}
	}
	if r := checkKSM(ksm.Host{Dir: filepath.Join(dir, "absent")}); r.Status != Warn || !strings.Contains(r.Detail, "memory_merge is refused") {
		t.Errorf("no KSM: %+v", r)
	}
}

func TestForeignImagesCheck(t *testing.T) {
	ctx := context.Background()
	cannot := func(_ context.Context, arch string) error {
		if arch == "riscv64" {
			return errors.New("riscv64: not supported on this machine/kernel")
		}
		return nil
	}
	if r := checkForeignImages(ctx, []string{"arm64"}, cannot); r.Status != OK || !strings.Contains(r.Detail, "arm64") {
		t.Errorf("runnable arch: %+v", r)
	}
	if r := checkForeignImages(ctx, []string{"arm64", "riscv64"}, cannot); r.Status != Missing || !strings.Contains(r.Detail, "riscv64: not supported") {
		t.Errorf("an arch the host cannot run: %+v", r)
	}
	if r := checkForeignImages(ctx, nil, cannot); r.Status != Skip {
		t.Errorf("no arch to check: %+v", r)
	}
}

// The passthrough path's needs are found in sysfs and /dev, each absence
// named; with all of them the groups are counted.
func TestCheckPassthrough(t *testing.T) {
	root := t.TempDir()
	if r := checkPassthrough(root); r.Status != Missing || !strings.Contains(r.Detail, "no IOMMU") {
		t.Errorf("no IOMMU: %+v", r)
	}
	for _, d := range []string{"sys/kernel/iommu_groups/0/devices", "sys/kernel/iommu_groups/1/devices", "sys/bus/pci/drivers/vfio-pci", "dev/vfio"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if r := checkPassthrough(root); r.Status != Missing || !strings.Contains(r.Detail, "/dev/vfio/vfio is absent") {
		t.Errorf("no vfio device: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(root, "dev/vfio/vfio"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := checkPassthrough(root); r.Status != OK || !strings.Contains(r.Detail, "2 groups") {
		t.Errorf("all there: %+v", r)
	}
}
