package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/procfs"
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
	testutil.SharesMachine(t)
	t.Parallel()
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

// spreadScenario spreads two guests over this host's libvirt and the
// remote machine's (%s: its URI).
const spreadScenario = `name: spread
baseline: lv
repetitions: 1
warmup: 0
duration: 1s
guests:
  - {name: lv, kind: vm, runtime: q35, accel: tcg, memory: 256M, count: 2, libvirt: ["qemu:///system", "%s"]}
workloads:
  - workload: cpu
`

// TestLibvirtGroupSpreadOverHosts: a group spread over this host's
// libvirt and a remote one's (reached over real SSH) runs, its report
// names the hosts, and nothing is left on either, after it ends or is
// interrupted; a run killed with SIGKILL leaves its remote domain and
// pool, which clean removes.
func TestLibvirtGroupSpreadOverHosts(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresLibvirt(t)
	testutil.Image(t)
	r := testutil.RemoteMachine(t)
	q := url.Values{"keyfile": {r.Identity}, "known_hosts": {r.KnownHosts}}
	uri := "qemu+ssh://" + r.User + "@" + r.Addr.String() + "/system?" + q.Encode()
	c := newCLI(t)
	scenario := c.scenario(fmt.Sprintf(spreadScenario, uri))
	host, _ := os.Hostname()
	stdout, stderr, code := c.run("run", scenario)
	if code != 0 || !strings.Contains(stdout, "libvirt on this host, "+host) {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left := libvirtLeft(t, c.latestRunKey()); len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}

	cmd, _ := startRun(t, c, scenario, "measure:")
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err == nil {
		t.Error("an interrupted run exited 0")
	}
	if left := libvirtLeft(t, c.latestRunKey()); len(left) > 0 {
		t.Errorf("left after Ctrl-C: %v", left)
	}

	cmd, _ = startRun(t, c, scenario, "measure:")
	key := c.latestRunKey()
	cmd.Process.Kill()
	cmd.Wait()
	if len(libvirtLeft(t, key)) == 0 {
		t.Fatal("a killed run should have left its domains (the test must be able to fail)")
	}
	stdout, stderr, code = c.run("clean")
	if code != 0 || !strings.Contains(stdout, "removed libvirt-pool vfleet-"+key+"-lv-1") || !strings.Contains(stdout, "removed libvirt-domain vfleet-"+key+"-lv-1") {
		t.Fatalf("clean: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left := libvirtLeft(t, key); len(left) > 0 {
		t.Errorf("left after SIGKILL and clean: %v", left)
	}
}

// libvirtLeft lists what of a run libvirt or the host still holds: its
// domains, pools, pool directories and QEMU processes.
func libvirtLeft(t *testing.T, key string) []string {
	t.Helper()
	prefix := "vfleet-" + key + "-"
	var left []string
	for _, what := range [][]string{{"list", "--all", "--name"}, {"pool-list", "--all", "--name"}} {
		out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, what...)...).Output()
		if err != nil {
			t.Fatalf("virsh %s: %v", what[0], err)
		}
		for _, name := range strings.Fields(string(out)) {
			if strings.HasPrefix(name, prefix) {
				left = append(left, what[0]+" "+name)
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join("/var/lib/vfleet/libvirt", prefix+"*"))
	left = append(left, dirs...)
	// libvirt names the domain in QEMU's -name guest=NAME,….
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "guest="+prefix) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if st, err := procfs.ReadStat(pid); err == nil && st.Running() {
			left = append(left, fmt.Sprintf("qemu pid %d", pid))
		}
	}
	return left
}

// libvirtNICScenario puts a guest of this host's libvirt on the bridge
// path and measures TCP round trips to the peer.
const libvirtNICScenario = `name: lvnic
baseline: lv
repetitions: 1
warmup: 0
duration: 2s
network: {path: bridge}
guests:
  - {name: lv, kind: vm, runtime: q35, accel: tcg, memory: 256M, libvirt: "qemu:///system", network: bridge}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`

// TestLibvirtGuestOnThePath: libvirt's QEMU opens the guest's tap in this
// host's namespace, the run then puts it on the bridge path, and the
// guest's round trips to the peer are measured; no tap is left in this
// host's namespace, after the run or after a SIGKILL and clean.
func TestLibvirtGuestOnThePath(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresLibvirt(t)
	testutil.Image(t)
	c := newCLI(t)
	scenario := c.scenario(libvirtNICScenario)
	stdout, stderr, code := c.run("run", scenario)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	n := 0
	for _, s := range c.latestSamples() {
		if s.Group == "lv" && s.Metric == "net.rtt_us" && s.Value > 0 {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no round trip measured:\n%s", stdout)
	}
	if left := append(libvirtLeft(t, c.latestRunKey()), rootTaps(t)...); len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}

	cmd, _ := startRun(t, c, scenario, "measure:")
	key := c.latestRunKey()
	cmd.Process.Kill()
	cmd.Wait()
	if len(libvirtLeft(t, key)) == 0 {
		t.Fatal("a killed run should have left its domain (the test must be able to fail)")
	}
	if stdout, stderr, code := c.run("clean"); code != 0 || !strings.Contains(stdout, "removed libvirt-domain vfleet-"+key+"-lv") {
		t.Fatalf("clean: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left := append(libvirtLeft(t, key), rootTaps(t)...); len(left) > 0 {
		t.Errorf("left after SIGKILL and clean: %v", left)
	}
}

// rootTaps are the taps vfleet made in this host's namespace still there.
func rootTaps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "type", "tun").Output()
	if err != nil {
		t.Fatal(err)
	}
	var taps []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "vfrt") {
			taps = append(taps, strings.TrimSuffix(f[1], ":"))
		}
	}
	return taps
}
