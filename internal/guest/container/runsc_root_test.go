package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// A runsc container's limits are applied to the guest's cgroups, which
// hold every process runsc starts for it (the sandbox and the gofer);
// none of them outlives the guest, nor does runsc's state.
func TestRunscLimitsHoldEveryProcessOfTheSandbox(t *testing.T) {
	g, env := newRunscGuest(t, "rs", guest.Spec{CPUs: "0", MemoryBytes: 256 << 20, CPULimit: 0.5})
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(ctx)
	info := g.Info()
	if p := info.Details["platform"]; !slices.Contains(runscPlatforms, p) {
		t.Errorf("platform recorded %q", p)
	}
	if k := info.Details[guest.KernelDetail]; k != guest.KernelGVisor {
		t.Errorf("kernel recorded %q, want %q: the audit cannot tell gVisor's kernel from a VM's otherwise", k, guest.KernelGVisor)
	}
	for file, want := range map[string]string{
		"cpuset/" + info.Cgroup + "/cpuset.cpus":           "0",
		"memory/" + info.Cgroup + "/memory.limit_in_bytes": strconv.Itoa(256 << 20),
		"cpu/" + info.Cgroup + "/cpu.cfs_quota_us":         "50000",
	} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", file))
		if os.IsNotExist(err) {
			t.Skipf("no cgroup v1 hierarchy here: %v", err)
		}
		if got := strings.TrimSpace(string(b)); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s", file, got, err, want)
		}
	}
	// Under the default profile a program starts threads, as sysbench
	// and every threaded tool does.
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"python3", "-c", "import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()"}})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "thread" {
		t.Errorf("a thread under security default: %v %+v", err, r)
	}
	stateRoot := filepath.Join(env.StateDir, "g", "runsc")
	sandbox := runscProcesses(t, stateRoot)
	if len(sandbox) < 2 {
		t.Fatalf("runsc processes of the guest: %v, want its sandbox and its gofer", sandbox)
	}
	for _, pid := range sandbox {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if !strings.Contains(string(b), "memory:"+info.Cgroup+"\n") || !strings.Contains(string(b), "freezer:"+info.Cgroup+"\n") {
			t.Errorf("runsc process %d is outside the guest's cgroup %s: %s", pid, info.Cgroup, b)
		}
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := testutil.Outliving(func() []int { return runscProcesses(t, stateRoot) }); len(left) > 0 {
		t.Errorf("runsc processes outlived the guest: %v", left)
	}
	if _, err := os.Stat(stateRoot); !os.IsNotExist(err) {
		t.Errorf("runsc's state outlived the guest: %v", err)
	}
}

// runscProcesses lists the running processes runsc started with its
// state in root.
func runscProcesses(t *testing.T, root string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), "--root="+root) {
			out = append(out, pid)
		}
	}
	return out
}

// A runsc guest on a switched and on a routed data path exchanges TCP
// with the run's peer: its sandbox's sockets live in the namespace whose
// eth0 is on the path.
func TestRunscGuestTalksTCPOnBridgeAndRoutedPaths(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, runscRuntime, "runsc")
	if err := (kind{}).Probe(context.Background(), runscRuntime); err != nil {
		t.Skip(err)
	}
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	key := make([]byte, 3)
	_, _ = rand.Read(key)
	paths := []netpath.Path{netpath.Bridge, netpath.Routed}
	n, err := netpath.Create(context.Background(), netpath.Options{RunKey: "t" + hex.EncodeToString(key), Ledger: led, Paths: paths})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	var l net.Listener
	if err := nsthread.DoPath(n.PeerNS(), func() (err error) { l, err = net.Listen("tcp4", "0.0.0.0:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	env := guest.Env{RunID: "rn" + strconv.Itoa(os.Getpid()), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: filepath.Join(root, "state"), Ledger: led}
	for _, p := range paths {
		t.Run(string(p), func(t *testing.T) {
			name := "g" + string(p)
			link, nsPath, err := n.Attach(name, p)
			if err != nil {
				t.Fatal(err)
			}
			g, err := (kind{}).New(guest.Spec{Name: name, Kind: KindName, Runtime: runscRuntime, NetNS: nsPath}, env)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer g.Stop(ctx)
			// recv(2), not read(2): under --network=host this runsc
			// answers a blocking read(2) of a socket with EAGAIN when no
			// data has come yet (docs/network.md).
			script := "import socket; s = socket.create_connection(('" + link.Peer.String() + "', " + strconv.Itoa(port) + "), timeout=5)\n" +
				"s.sendall(b'round-trip'); print(s.recv(64).decode())"
			r, err := g.Exec(ctx, agent.Request{Argv: []string{"python3", "-c", script}, TimeoutMS: 10000})
			if err != nil || strings.TrimSpace(string(r.Stdout)) != "round-trip" {
				t.Errorf("guest %s to peer %s: %v %+v", link.Addr, link.Peer, err, r)
			}
			if err := g.Stop(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}

// A runsc guest on no network has a working loopback, as a runc one has.
func TestRunscGuestOnNoNetworkHasALoopback(t *testing.T) {
	g, _ := newRunscGuest(t, "rl", guest.Spec{})
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(ctx)
	script := "import socket\nl = socket.create_server(('127.0.0.1', 0))\nc = socket.create_connection(l.getsockname(), timeout=5)\n" +
		"s, _ = l.accept()\nc.sendall(b'loopback')\nprint(s.recv(64).decode())"
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"python3", "-c", script}, TimeoutMS: 10000})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "loopback" {
		t.Errorf("loopback: %v %+v", err, r)
	}
	if err := g.Stop(ctx); err != nil {
		t.Error(err)
	}
}

// newRunscGuest is an unstarted runsc guest "g" of spec, in a run of its
// own named from prefix, on a host whose probe takes runsc; the test fails
// if anything of it is left at its end.
func newRunscGuest(t *testing.T, prefix string, spec guest.Spec) (guest.Guest, guest.Env) {
	t.Helper()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, runscRuntime, "runsc")
	if err := (kind{}).Probe(context.Background(), runscRuntime); err != nil {
		t.Skip(err)
	}
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: prefix + strconv.Itoa(os.Getpid()), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: filepath.Join(root, "state"), Ledger: led}
	spec.Name, spec.Kind, spec.Runtime = "g", KindName, runscRuntime
	g, err := (kind{}).New(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	return g, env
}
