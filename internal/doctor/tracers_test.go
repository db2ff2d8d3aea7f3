package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

func TestTracersCheck(t *testing.T) {
	absent, avail := hostinfo.TracerAbsent, hostinfo.TracerAvailable
	unmounted := hostinfo.TracerBuiltIn + " (tracefs not mounted)"
	for _, tc := range []struct {
		name    string
		tracers map[string]string
		status  Status
		detail  string
	}{
		{"this host", map[string]string{"timerlat": absent, "osnoise": absent, "hwlat": absent}, Warn,
			"host kernel 6.18.44: timerlat, osnoise, hwlat not in this kernel; containers share it"},
		{"all available", map[string]string{"timerlat": avail, "osnoise": avail, "hwlat": avail}, OK,
			"host kernel 6.18.44: timerlat, osnoise, hwlat available"},
		// rtla mounts tracefs itself.
		{"built in, tracefs not mounted", map[string]string{"timerlat": unmounted, "osnoise": unmounted, "hwlat": absent}, OK,
			"host kernel 6.18.44: timerlat, osnoise built in (tracefs not mounted); hwlat not in this kernel"},
		{"osnoise only", map[string]string{"timerlat": absent, "osnoise": avail, "hwlat": avail}, Warn,
			"host kernel 6.18.44: timerlat not in this kernel; osnoise, hwlat available; containers share it"},
		{"nothing to tell by", map[string]string{"timerlat": hostinfo.TracerUnknown, "osnoise": hostinfo.TracerUnknown, "hwlat": hostinfo.TracerUnknown}, Warn,
			"host kernel 6.18.44: timerlat, osnoise, hwlat unknown; containers share it"},
	} {
		r := checkTracers("6.18.44", tc.tracers, "")
		if r.Status != tc.status || r.Detail != tc.detail {
			t.Errorf("%s: got %s %q, want %s %q", tc.name, r.Status, r.Detail, tc.status, tc.detail)
		}
		if (r.Status == Warn) != strings.Contains(r.Fix, "CONFIG_TIMERLAT_TRACER") {
			t.Errorf("%s: fix %q with status %s", tc.name, r.Fix, r.Status)
		}
	}
	if r := checkTracers("", nil, ""); r.Status != Warn || r.Detail != "host kernel: latency tracers unknown; containers share it" {
		t.Errorf("nothing known: %+v", r)
	}
}

// TestTracersOnThisHost runs the real lookup: whatever the kernel has, the
// check answers, and never fails.
func TestTracersOnThisHost(t *testing.T) {
	release, tracers := hostinfo.HostTracers(hostinfo.Options{})
	r := checkTracers(release, tracers, "")
	if r.Status != OK && r.Status != Warn {
		t.Fatalf("%+v", r)
	}
	t.Logf("%s: %s", r.Status, r.Detail)
}

// The kernel VM guests boot is described from the configuration beside it
// in the image, and does not change the host's verdict.
func TestTracersOfTheVMKernel(t *testing.T) {
	boot := t.TempDir()
	kernel := filepath.Join(boot, "vmlinuz-6.1.0-56-cloud-amd64")
	config := "# CONFIG_HWLAT_TRACER is not set\n# CONFIG_OSNOISE_TRACER is not set\n# CONFIG_TIMERLAT_TRACER is not set\nCONFIG_FTRACE=y\n"
	if err := os.WriteFile(filepath.Join(boot, "config-6.1.0-56-cloud-amd64"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	vm := vmKernelTracers(kernel)
	if vm != "VM guests' kernel 6.1.0-56-cloud-amd64: timerlat, osnoise, hwlat not in this kernel" {
		t.Errorf("vm kernel: %q", vm)
	}
	if vmKernelTracers(filepath.Join(boot, "vmlinuz-other")) != "" || vmKernelTracers("") != "" {
		t.Error("a kernel without its configuration is described")
	}
	avail := hostinfo.TracerAvailable
	r := checkTracers("6.18.44", map[string]string{"timerlat": avail, "osnoise": avail, "hwlat": avail}, vm)
	if r.Status != OK || !strings.HasSuffix(r.Detail, "; "+vm) {
		t.Errorf("%+v", r)
	}
}
