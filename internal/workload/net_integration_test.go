package workload

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// netPair is a peer and a guest network namespace joined by a veth pair,
// 198.18.0.1 on the peer side and 198.18.0.2 on the guest side. Both
// namespaces are unnamed: they vanish with the last process and handle.
type netPair struct {
	peer, guest netns.NsHandle
	links       []string // "net:[inode]", as /proc/PID/ns/net reads for a process inside
}

// processesIn lists the processes whose network namespace is link.
func processesIn(link string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == link {
			pids = append(pids, pid)
		}
	}
	return pids
}

func newNetPair(t *testing.T) *netPair {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	// netns.New moves this thread; it must come back before unlocking.
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic("cannot return to the test's network namespace: " + err.Error())
		}
	}()
	p := &netPair{}
	// Registered first, so it runs after every server, client and handle
	// of the pair is gone: nothing may still live in the namespaces.
	t.Cleanup(func() {
		for _, link := range p.links {
			if pids := processesIn(link); len(pids) > 0 {
				t.Errorf("processes %v still in network namespace %s", pids, link)
			}
		}
	})
	if p.peer, err = netns.New(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.peer.Close() })
	if p.guest, err = netns.New(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.guest.Close() })
	for _, ns := range []netns.NsHandle{p.peer, p.guest} {
		link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", ns))
		if err != nil {
			t.Fatal(err)
		}
		p.links = append(p.links, link)
	}

	ph, err := netlink.NewHandleAt(p.peer)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	gh, err := netlink.NewHandleAt(p.guest)
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vfp"}, PeerName: "vfg", PeerNamespace: netlink.NsFd(p.guest)}
	if err := ph.LinkAdd(veth); err != nil {
		t.Fatalf("add veth in the peer namespace: %v", err)
	}
	for _, side := range []struct {
		h          *netlink.Handle
		link, addr string
	}{{ph, "vfp", "198.18.0.1/30"}, {gh, "vfg", "198.18.0.2/30"}} {
		for _, name := range []string{"lo", side.link} {
			l, err := side.h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if name != "lo" {
				a, _ := netlink.ParseAddr(side.addr)
				if err := side.h.AddrAdd(l, a); err != nil {
					t.Fatal(err)
				}
			}
			if err := side.h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// startIn starts cmd inside ns: a forked child inherits the network
// namespace of the thread that forks it.
func startIn(ns netns.NsHandle, cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return err
	}
	startErr := cmd.Start()
	if err := netns.Set(orig); err != nil {
		panic("cannot return to the test's network namespace: " + err.Error())
	}
	return startErr
}

// startServer runs s in the peer namespace until the test ends and waits
// until its socket is bound.
func (p *netPair) startServer(t *testing.T, s Server) {
	t.Helper()
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startIn(p.peer, cmd); err != nil {
		t.Fatalf("start server %s: %v", s.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for !listening(cmd.Process.Pid, s.Proto, s.Port) {
		select {
		case <-exited:
			t.Fatalf("server %s exited: %s", s.Name, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s not listening on %s/%d after 10 s: %s", s.Name, s.Proto, s.Port, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listening reads the socket tables of pid's network namespace: a TCP
// socket in LISTEN state, or any UDP socket, bound to port.
func listening(pid int, proto string, port int) bool {
	local := fmt.Sprintf(":%04X ", port)
	for _, table := range []string{proto, proto + "6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1]+" ", local) && (proto == "udp" || f[3] == "0A") {
				return true
			}
		}
	}
	return false
}

// run executes ex in the guest namespace as the agent would: bounded by its
// timeout, in its own process group.
func (p *netPair) run(ctx context.Context, ex Exec) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, ex.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ex.Argv[0], ex.Argv[1:]...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startIn(p.guest, cmd); err != nil {
		return nil, nil, err
	}
	err = cmd.Wait()
	return o.Bytes(), e.Bytes(), err
}

// TestNetworkWorkloadsEndToEnd runs the servers and clients the adapters
// describe between two real network namespaces, the way the runner does
// (the servers bound to the peer's address, as on a remote peer),
// and parses what the tools print.
func TestNetworkWorkloadsEndToEnd(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, programs.Iperf3.Name, programs.Iperf3.Package)
	testutil.RequiresTool(t, programs.Sockperf.Name, programs.Sockperf.Package)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })

	pair := newNetPair(t)
	peer := Peer{Addr: netip.MustParseAddr("198.18.0.1"), Port: 21000}
	cases := []struct {
		workload string
		params   Params
		metric   string
	}{
		{"net-throughput", nil, "net.retransmits"},
		{"net-throughput", Params{"proto": "udp", "direction": "down", "msg_size": "1400", "bitrate": "200M"}, "net.lost_pct"},
		{"net-latency", nil, "net.rtt_us"},
		{"net-latency", Params{"proto": "tcp", "background_streams": "2", "background_direction": "opposite"}, "net.rtt_us"},
	}
	started := map[string]bool{}
	for _, tc := range cases {
		w := networked(t, tc.workload)
		for _, s := range w.Servers(merge(w.Defaults(), tc.params), Listen{Addr: peer.Addr, Port: peer.Port, Only: true}) {
			if !started[s.Name] {
				pair.startServer(t, s)
				started[s.Name] = true
			}
		}
	}
	for _, tc := range cases {
		w := networked(t, tc.workload)
		ne, err := w.NetCommand(merge(w.Defaults(), tc.params), time.Second, peer)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			stdout, stderr []byte
			err            error
		}
		var bg []chan result
		for _, ex := range ne.Background {
			ch := make(chan result, 1)
			go func() {
				o, e, err := pair.run(context.Background(), ex)
				ch <- result{o, e, err}
			}()
			bg = append(bg, ch)
		}
		stdout, stderr, err := pair.run(context.Background(), ne.Exec)
		for i, ch := range bg {
			if r := <-ch; r.err != nil {
				t.Errorf("%s %v: background %d: %v: %s", tc.workload, tc.params, i, r.err, r.stderr)
			}
		}
		if err != nil {
			t.Fatalf("%s %v: %v: %s %s", tc.workload, tc.params, err, stdout, stderr)
		}
		limit := ne.MaxOutput
		if limit == 0 {
			limit = agent.MaxOutput
		}
		if int64(len(stdout)) > limit {
			t.Errorf("%s %v: %d bytes of output, the agent would keep %d", tc.workload, tc.params, len(stdout), limit)
		}
		samples, err := w.Parse(stdout, stderr)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.workload, tc.params, err)
		}
		if find(samples, tc.metric) < 0 || (tc.workload == "net-throughput" && find(samples, "net.throughput_bps") <= 0) {
			t.Errorf("%s %v: samples %+v", tc.workload, tc.params, samples)
		}
		for _, s := range samples {
			if s.Hist != nil {
				t.Logf("%s %v: %d round trips, p50 %.1f us, p99 %.1f us, %d bytes of output", tc.workload, tc.params, s.Hist.Count(), s.Hist.Quantile(0.5), s.Hist.Quantile(0.99), len(stdout))
			}
		}
	}
}
