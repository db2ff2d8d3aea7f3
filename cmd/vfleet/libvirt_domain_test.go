package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/testutil"
)

// userDomainFleetScenario runs two guests from the user's domain %s.
const userDomainFleetScenario = `name: fleetuserdomain
baseline: web
guests:
  - {name: web, kind: vm, runtime: q35, count: 2, libvirt: "qemu:///system", image: "libvirt:%s"}
workloads:
  - workload: cpu
`

// TestLibvirtFleetOfAUsersDomain: a fleet of a user's libvirt domain
// (image libvirt:DOMAIN) is two running copies of it in virsh once
// `fleet up` has exited, which `fleet status` and `exec` reach and `fleet
// down` removes; the user's domain, which vfleet only read, is as it was:
// its definition, its state (shut off) and its disk. A domain that is not
// there is refused before anything starts, naming those that are.
func TestLibvirtFleetOfAUsersDomain(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresLibvirt(t)
	testutil.Image(t)
	disk := testutil.ForeignVM(t)
	name := fmt.Sprintf("vfleet-test-userdom-%d", time.Now().UnixNano()%1e9)
	xml := filepath.Join(t.TempDir(), "domain.xml")
	if err := os.WriteFile(xml, []byte(fmt.Sprintf(`<domain type="qemu"><name>%s</name><memory unit="MiB">512</memory>
<os><type arch="x86_64" machine="q35">hvm</type><kernel>%s</kernel><initrd>%s</initrd><cmdline>root=/dev/vda rw</cmdline></os>
<devices><disk type="file" device="disk"><driver name="qemu" type="qcow2"/><source file="%s"/><target dev="vda" bus="virtio"/></disk></devices>
</domain>`, name, disk.Kernel, disk.Initrd, disk.QCOW2)), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, "define", xml)
	t.Cleanup(func() { virsh(t, "undefine", name) })
	before := userDomainNow(t, name, disk.QCOW2)

	c := newCLI(t)
	_, stderr, code := c.run("run", c.scenario(fmt.Sprintf(userDomainFleetScenario, "vfleet-test-no-such-domain")))
	if code == 0 || !strings.Contains(stderr, "no such domain") || !strings.Contains(stderr, name) {
		t.Errorf("a domain that is not there: exit %d, want a refusal naming %s:\n%s", code, name, stderr)
	}

	s := upFleet(t, c, fmt.Sprintf(userDomainFleetScenario, name), "itest-userdom")
	copies := []string{"vfleet-" + s.RunKey + "-web-0", "vfleet-" + s.RunKey + "-web-1"}
	running := strings.Fields(virsh(t, "list", "--name"))
	for _, d := range copies {
		if !strings.Contains(" "+strings.Join(running, " ")+" ", " "+d+" ") {
			t.Errorf("virsh does not list %s running after fleet up exited: %v", d, running)
		}
	}
	stdout, stderr, code := c.run("fleet", "status", "itest-userdom")
	if code != 0 || !strings.Contains(stdout, "2 of 2 agents answer") || strings.Contains(stdout, "DEAD") {
		t.Fatalf("fleet status: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = c.run("fleet", "exec", "--fleet", "itest-userdom", "web-1", "--", "sh", "-c", "cat /proc/1/comm /proc/sys/kernel/hostname")
	if code != 0 || stdout != "systemd\nweb-1\n" {
		t.Fatalf("exec in a copy of the domain: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = c.run("fleet", "down", "itest-userdom")
	if code != 0 || strings.Count(stdout, "removed libvirt-domain vfleet-"+s.RunKey) != 2 {
		t.Fatalf("fleet down: exit %d\n%s\n%s", code, stdout, stderr)
	}
	all := " " + strings.Join(strings.Fields(virsh(t, "list", "--all", "--name")), " ") + " "
	for _, d := range copies {
		if strings.Contains(all, " "+d+" ") {
			t.Errorf("virsh still lists %s after fleet down", d)
		}
	}
	if left := fleetProcesses(s); len(left) > 0 {
		t.Errorf("the copies' QEMU still run after down: %v", left)
	}
	if after := userDomainNow(t, name, disk.QCOW2); after != before {
		t.Errorf("the user's domain changed:\nbefore %s\nafter %s", before, after)
	}
}

// virsh runs virsh at the system URI and returns its output.
func virsh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// userDomainNow is what vfleet must not change of a user's domain: its
// state, its disk's bytes and its definition.
func userDomainNow(t *testing.T, name, disk string) string {
	t.Helper()
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("state %s\ndisk sha256 %s\n%s", strings.TrimSpace(virsh(t, "domstate", name)), hex.EncodeToString(h.Sum(nil)), virsh(t, "dumpxml", "--inactive", name))
}
