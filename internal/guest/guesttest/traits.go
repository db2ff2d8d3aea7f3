package guesttest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// The test network's device and addressing: a tap alone in a namespace of
// the test's own, on the benchmarking range the tests' networks use.
const (
	tapName = "conf0"
	tapMAC  = "02:00:c6:12:fe:02"
)

var (
	tapAddr    = netip.MustParsePrefix("198.18.254.2/30")
	tapGateway = netip.MustParseAddr("198.18.254.1")
)

// traits checks on one started guest what its kind's traits (under the
// runtime under test) claim: how it joins a network, whether its agent is a host process,
// whether it is placed by pinning vCPUs; and that its Info's AgentAddr,
// where it has one, takes a second client while the first works. What the
// kind does not claim, New refuses rather than ignores.
func traits(t *testing.T, o Options) {
	tr := traitsOf(o)
	refused := map[string]guest.Spec{}
	if tr.Network != guest.NetNamespace {
		bad := o.spec("conf-t")
		bad.NetNS = "/run/netns/none"
		refused["a network namespace"] = bad
	}
	if tr.Network != guest.NetTap {
		bad := o.spec("conf-t")
		bad.Tap = &guest.TapConfig{NSPath: "/run/netns/none", Name: tapName, Addr: tapAddr, Gateway: tapGateway, MAC: tapMAC}
		refused["a tap"] = bad
	}
	if !tr.PinsVCPUs {
		bad := o.spec("conf-t")
		bad.PinVCPUs = "0"
		refused["pinned vCPUs"] = bad
	}
	for what, spec := range refused {
		if _, err := o.Kind.New(spec, guest.Env{}); err == nil {
			t.Errorf("a guest given %s, which its kind's traits (%+v) do not take, was accepted", what, tr)
		}
	}

	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	spec := o.spec("conf-t")
	// A guest on the network of the system it runs in joins none of ours.
	nsPath := ""
	if tr.Network != guest.NetOwn {
		var removeNS func() error
		nsPath, removeNS = testNetNS(t, tr.Network == guest.NetTap)
		defer func() {
			if err := removeNS(); err != nil {
				t.Error(err)
			}
		}()
	}
	switch tr.Network {
	case guest.NetTap:
		spec.Tap = &guest.TapConfig{NSPath: nsPath, Name: tapName, Addr: tapAddr, Gateway: tapGateway, MAC: tapMAC}
	case guest.NetNamespace:
		spec.NetNS = nsPath
	}
	cpu := lastCPU(t)
	if tr.PinsVCPUs {
		spec.PinVCPUs = strconv.Itoa(cpu)
	}
	g, e := newGuest(t, o, spec)
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(ctx)
	info := g.Info()

	switch tr.Network {
	case guest.NetTap:
		r, err := g.Exec(ctx, agent.Request{Argv: []string{"cat", "/sys/class/net/eth0/address"}})
		if got := strings.TrimSpace(string(r.Stdout)); err != nil || got != tapMAC {
			t.Errorf("a guest on tap %s has eth0 %q (%v), want its MAC %s", tapName, got, err, tapMAC)
		}
	case guest.NetNamespace:
		var st syscall.Stat_t
		if err := syscall.Stat(nsPath, &st); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("net:[%d]", st.Ino)
		if tr.AgentInGuest {
			// The guest's kernel is not the host's (gVisor's sentry):
			// the host processes that carry its sockets are the ones in
			// the namespace.
			for _, pid := range info.PIDs {
				if got, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); got != want {
					t.Errorf("a guest told to join %s has its process %d in network namespace %q (%v), want %s", nsPath, pid, got, err, want)
				}
			}
		} else {
			r, err := g.Exec(ctx, agent.Request{Argv: []string{"readlink", "/proc/self/ns/net"}})
			if got := strings.TrimSpace(string(r.Stdout)); err != nil || got != want {
				t.Errorf("a guest told to join %s runs in network namespace %q (%v), want %s", nsPath, got, err, want)
			}
		}
	}

	agentOnHost := false
	for _, p := range testutil.RunningIn(t, cgroup.PathOf(e.RunID, "")) {
		agentOnHost = agentOnHost || strings.Contains(p, "("+comm(o.AgentPath)+")")
	}
	if agentOnHost == tr.AgentInGuest {
		t.Errorf("the agent runs as a host process: %v, but the kind's traits say AgentInGuest: %v", agentOnHost, tr.AgentInGuest)
	}

	if tr.PinsVCPUs && !pinnedThread(t, info.PIDs, cpu) {
		t.Errorf("no thread of the guest's processes %v is pinned to CPU %d alone, as pin_vcpus %s asks", info.PIDs, cpu, spec.PinVCPUs)
	}

	if info.AgentAddr != "" {
		second, err := agent.Dial(ctx, info.AgentAddr)
		if err != nil {
			t.Fatalf("a second client at the agent's address %s: %v", info.AgentAddr, err)
		}
		defer second.Close()
		busy := make(chan error, 1)
		go func() {
			_, err := g.Exec(ctx, agent.Request{Argv: []string{"sleep", "1"}})
			busy <- err
		}()
		if r, err := second.Do(ctx, agent.Request{Argv: []string{"true"}}); err != nil || !r.Succeeded() {
			t.Errorf("the second client's request: %v %+v", err, r)
		}
		if err := <-busy; err != nil {
			t.Errorf("the first client's request beside the second's: %v", err)
		}
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// comm is the name the kernel gives a process running the program at path.
func comm(path string) string {
	name := filepath.Base(path)
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}

// testNetNS makes a named network namespace, with a VM's tap in it if
// withTap, and returns its path and how to delete it.
func testNetNS(t *testing.T, withTap bool) (string, func() error) {
	t.Helper()
	name := fmt.Sprintf("vfconf-%d", os.Getpid())
	testutil.ScopeLeaks(t, func() []string { return []string{name} })
	remove := func() error {
		if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete the test's network namespace: %w", err)
		}
		return nil
	}
	err := nsthread.Do(netns.None(), func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return err
		}
		defer h.Close()
		if !withTap {
			return nil
		}
		// The thread is in the new namespace, where the tap is made; its
		// persistence keeps it once the descriptor is closed.
		tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: tapName}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR}
		err = netlink.LinkAdd(tap)
		for _, f := range tap.Fds {
			f.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("test network namespace %s: %v", name, errors.Join(err, remove()))
	}
	return filepath.Join("/run/netns", name), remove
}

// lastCPU is the last CPU this process may run on: pinned there, a thread
// differs from one left to the scheduler wherever the host has two CPUs.
func lastCPU(t *testing.T) int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	last := 0
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			last = cpu
		}
	}
	return last
}

// pinnedThread says whether a thread of pids may run on cpu alone.
func pinnedThread(t *testing.T, pids []int, cpu int) bool {
	t.Helper()
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			var set unix.CPUSet
			if unix.SchedGetaffinity(tid, &set) == nil && set.Count() == 1 && set.IsSet(cpu) {
				return true
			}
		}
	}
	return false
}
