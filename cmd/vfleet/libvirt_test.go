package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

const libvirtFleetScenario = `name: fleetlibvirt
baseline: lv
guests:
  - {name: lv, kind: vm, runtime: q35, memory: 256M, libvirt: "qemu:///system"}
workloads:
  - workload: cpu
`

// TestLibvirtFleetStaysInVirshUntilDown: a libvirt-managed fleet is a
// domain a libvirt user sees in virsh once `fleet up` has exited; the
// fleet's commands reach it, and `fleet down` removes the domain.
func TestLibvirtFleetStaysInVirshUntilDown(t *testing.T) {
	testutil.RequiresLibvirt(t)
	testutil.Image(t)
	c := newCLI(t)
	s := upFleet(t, c, libvirtFleetScenario, "itest-libvirt")
	domain := "vfleet-" + s.RunKey + "-lv"
	if !virshLists(t, domain) {
		out, _ := exec.Command("virsh", "-c", "qemu:///system", "list", "--all").CombinedOutput()
		t.Fatalf("virsh does not list %s after fleet up exited:\n%s", domain, out)
	}
	stdout, stderr, code := c.run("fleet", "exec", "--fleet", "itest-libvirt", "lv", "--", "cat", "/proc/sys/kernel/hostname")
	if code != 0 || stdout != "lv\n" {
		t.Fatalf("exec in the domain: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = c.run("fleet", "down", "itest-libvirt")
	if code != 0 || !strings.Contains(stdout, "removed libvirt-domain "+domain) {
		t.Fatalf("fleet down: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if virshLists(t, domain) {
		t.Errorf("virsh still lists %s after fleet down", domain)
	}
	if running := fleetProcesses(s); len(running) > 0 {
		t.Errorf("the domain's QEMU still runs after down: %v", running)
	}
}

// virshLists says whether libvirt knows the domain, running or not.
func virshLists(t *testing.T, domain string) bool {
	t.Helper()
	out, err := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").Output()
	if err != nil {
		t.Fatalf("virsh list: %v", err)
	}
	for _, name := range strings.Fields(string(out)) {
		if name == domain {
			return true
		}
	}
	return false
}
