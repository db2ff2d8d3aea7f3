package doctor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/testutil"
)

// hostLinks lists the links of the test's own network namespace.
func hostLinks(t *testing.T) []string {
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// ownNetns names the network namespace the test process runs in.
func ownNetns(t *testing.T) string {
	ns, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// strayThreads lists this process's threads that are not in the network
// namespace own: a throwaway namespace lives as long as a thread is in it.
func strayThreads(own string) []string {
	tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
	var stray []string
	for _, p := range tasks {
		if ns, err := os.Readlink(p); err == nil && ns != own {
			stray = append(stray, p+" -> "+ns)
		}
	}
	return stray
}

// TestNetnsBPFAndXDPOnThisHost runs the real probes. The kernels vfleet
// supports all load BPF and attach XDP natively to veth, so a failure
// here is a regression, not a reason to skip.
func TestNetnsBPFAndXDPOnThisHost(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	linksBefore := hostLinks(t)
	own := ownNetns(t)
	ctx := context.Background()
	for name, check := range map[string]func(context.Context) Result{
		"network namespaces": checkNetns, "BPF": checkBPF, "XDP native on veth": checkXDPNative,
	} {
		r := check(ctx)
		if r.Status != OK {
			t.Errorf("%s: %+v", name, r)
		}
		t.Logf("%s: %s", name, r.Detail)
	}
	testutil.CheckLeaks(t, before)
	if after := hostLinks(t); !slices.Equal(after, linksBefore) {
		t.Errorf("links changed: before %v, after %v", linksBefore, after)
	}
	if stray := strayThreads(own); len(stray) > 0 {
		t.Errorf("threads left in a probe's namespace: %v", stray)
	}
}

// TestOVSOnThisHost runs the real programs and the real datapath probe:
// either datapath is an answer, a failure is not.
func TestOVSOnThisHost(t *testing.T) {
	testutil.RequiresTool(t, "ovs-vswitchd", "openvswitch-switch")
	r := checkOVS(context.Background(), netpath.ProbeOVSDatapath)
	if r.Status != OK && r.Status != Warn {
		t.Fatalf("%+v", r)
	}
	t.Logf("%s: %s", r.Status, r.Detail)
}

// qemuOn lists running processes whose command line names kernel.
func qemuOn(kernel string) []string {
	var found []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), kernel) {
			found = append(found, p)
		}
	}
	return found
}

// TestBootProbesOnThisHost boots a real guest kernel, named by
// VFLEET_TEST_KERNEL, under both accelerators at once, as doctor does. TCG
// must boot it; KVM must give an honest answer within its timeout either
// way (on hosts where /dev/kvm exists but cannot run a kernel it fails).
func TestBootProbesOnThisHost(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	kernel := os.Getenv("VFLEET_TEST_KERNEL")
	if kernel == "" {
		t.Skip("VFLEET_TEST_KERNEL is not set: point it at a guest kernel (the image's rootfs/boot/vmlinuz-*) to boot it")
	}
	if _, err := os.Stat(kernel); err != nil {
		t.Fatalf("VFLEET_TEST_KERNEL: %v", err)
	}
	before := testutil.TakeSnapshot(t)
	kvmTimeout := 10 * time.Second
	var kvm, tcg Result
	var kvmTook time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		began := time.Now()
		kvm = checkAccel(context.Background(), accelProbe{accel: "kvm", kernel: kernel, timeout: kvmTimeout, kvmDevice: "/dev/kvm"})
		kvmTook = time.Since(began)
	})
	wg.Go(func() {
		tcg = checkAccel(context.Background(), accelProbe{accel: "tcg", kernel: kernel, timeout: 120 * time.Second})
	})
	wg.Wait()
	t.Logf("KVM: %s %s", kvm.Status, kvm.Detail)
	t.Logf("TCG: %s %s", tcg.Status, tcg.Detail)
	if tcg.Status != OK {
		t.Errorf("TCG did not boot the guest kernel: %+v", tcg)
	}
	// Not a timing assertion: a probe that ignored its timeout would hang
	// for as long as the guest does, i.e. forever.
	if kvmTook > kvmTimeout+bootSlack {
		t.Errorf("KVM probe overran its %s timeout: %s", kvmTimeout, kvmTook)
	}
	if kvm.Status == Fail && !strings.Contains(kvm.Detail, "TCG emulation") {
		t.Errorf("a failing KVM probe must say VMs fall back to TCG: %+v", kvm)
	}
	testutil.CheckLeaks(t, before)
	if left := qemuOn(kernel); len(left) > 0 {
		t.Errorf("QEMU left running: %v", left)
	}
}
