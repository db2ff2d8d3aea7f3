package metrics

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/testutil"
)

const childEnv = "VFLEET_METRICS_TEST_CHILD"

// childBytes is what the child allocates once it is in its cgroup, so the
// memory is charged there.
const childBytes = 16 << 20

// TestChildProcess is not a test: it is the body of the child process
// TestLiveGuestIsReadFromCgroupAndProc starts. It waits to be moved into
// its cgroup, allocates and touches memory, then spins until its stdin
// closes or 20 s passed.
func TestChildProcess(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		return
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(2)
	}
	mem := make([]byte, childBytes)
	for i := range mem {
		mem[i] = byte(i)
	}
	closed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, in); close(closed) }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-closed:
			runtime.KeepAlive(mem)
			os.Exit(0)
		case <-deadline:
			os.Exit(3)
		default:
		}
	}
}

// TestLiveGuestIsReadFromCgroupAndProc reads a real process in a real
// cgroup and network namespace the way a scrape reads a guest: once as a
// container (through its cgroup) and once as a baseline (through /proc).
func TestLiveGuestIsReadFromCgroupAndProc(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)

	mode, err := hostinfo.CgroupMode("/sys")
	if err != nil {
		t.Fatal(err)
	}
	cgroup := fmt.Sprintf("/vfleet/metrics-test-%d", os.Getpid())
	var dirs []string
	if mode == hostinfo.CgroupV2 {
		dirs = []string{filepath.Join("/sys/fs/cgroup", cgroup)}
	} else {
		dirs = []string{filepath.Join("/sys/fs/cgroup/cpuacct", cgroup), filepath.Join("/sys/fs/cgroup/memory", cgroup)}
	}
	for _, d := range dirs {
		parent := filepath.Dir(d)
		_, perr := os.Stat(parent)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove test cgroup: %v", err)
			}
			if os.IsNotExist(perr) {
				_ = os.Remove(parent)
			}
		}()
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child must be gone before its cgroup can be removed; deferred
	// calls run last-in first-out.
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}()
	pid := cmd.Process.Pid
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Both ends live in the child's namespace and die with it.
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vfmetrics0", Namespace: netlink.NsPid(pid)},
		PeerName: "vfmetrics1", PeerNamespace: netlink.NsPid(pid)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add a link in the child's network namespace: %v", err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}

	c := NewRunCollector(Options{})
	c.RunStarted(runner.RunEvent{ID: 1, Scenario: "live"})
	c.GuestStarting(runner.GuestEvent{})(runner.GuestEvent{RunID: 1, Name: "c-0", Kind: "container", Cgroup: cgroup, PIDs: []int{pid}}, nil)
	c.GuestStarting(runner.GuestEvent{})(runner.GuestEvent{RunID: 1, Name: "base", Kind: "host", PIDs: []int{pid}}, nil)

	// Wait, bounded, until the child has allocated and spun a little.
	var cpu, mem map[string]float64
	var net []map[string]string
	deadline := time.Now().Add(15 * time.Second)
	for {
		cpu, mem = values(t, c, "vfleet_guest_cpu_seconds_total"), values(t, c, "vfleet_guest_memory_bytes")
		net = seriesLabels(t, c, "vfleet_guest_network_receive_bytes_total")
		if cpu["c-0"] > 0 && mem["c-0"] >= childBytes && mem["base"] >= childBytes || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cpu["c-0"] <= 0 || mem["c-0"] < childBytes {
		t.Errorf("cgroup read: cpu %v s, memory %v bytes; want cpu > 0 and memory >= %d", cpu["c-0"], mem["c-0"], childBytes)
	}
	if _, ok := cpu["base"]; !ok || mem["base"] < childBytes {
		t.Errorf("process read: cpu %v, memory %v bytes; want a cpu value and memory >= %d", cpu, mem["base"], childBytes)
	}
	// Both guests are the same process in its own namespace: each gets its
	// interfaces, loopback left out.
	seen := map[string]bool{}
	for _, l := range net {
		seen[l["guest"]+" "+l["interface"]] = true
	}
	if len(net) != 4 || !seen["c-0 vfmetrics0"] || !seen["base vfmetrics1"] {
		t.Errorf("network series %v, want vfmetrics0 and vfmetrics1 for both guests", net)
	}
}

// values returns one metric's value by guest.
func values(t *testing.T, c *RunCollector, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	mfs := gather(t, c)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "guest" {
					v := m.GetGauge().GetValue()
					if m.GetCounter() != nil {
						v = m.GetCounter().GetValue()
					}
					out[lp.GetValue()] = v
				}
			}
		}
	}
	return out
}
