package qemu

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/testutil"
)

// libvirtSpec is a libvirt-managed guest as a scenario's q35 group with
// `libvirt: qemu:///system` makes it.
func libvirtSpec(name string) guest.Spec {
	return guest.Spec{Name: name, Kind: KindName, Accel: AccelTCG, VCPUs: 2, PinVCPUs: "0-1", Libvirt: LibvirtSystem}
}

// TestLibvirtLifecycle starts a VM through libvirt, reaches its agent on
// the domain's virtio-serial channel, and stops it: no domain, no QEMU,
// no file and no ledger entry may be left.
func TestLibvirtLifecycle(t *testing.T) {
	testutil.RequiresLibvirt(t)
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, libvirtSpec("lv-a"), env)
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	name := domainName(env.RunID, "lv-a")
	// libvirt's QEMU runs as root (the static DAC label) under libvirt's
	// seccomp sandbox.
	if info.Details["libvirt_domain"] != name || len(info.PIDs) != 1 || info.Details["vcpu_pins"] != "0,1" ||
		info.Details["qemu_user"] != "0" || !strings.HasPrefix(info.Details["qemu_sandbox"], "on") {
		t.Errorf("info = %+v", info)
	}
	qemu, err := procfs.Find(info.PIDs[0])
	if err != nil || !qemu.Alive() {
		t.Fatalf("the domain's QEMU, pid %v: %v", info.PIDs, err)
	}
	if !domainExists(t, name) {
		t.Fatalf("virsh would not list %s", name)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"hostname"}})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "lv-a" {
		t.Fatalf("hostname in the guest: %v %+v", err, r)
	}
	// <cputune> pinned each vCPU thread to its own CPU.
	for i, tid := range strings.Split(info.Details["vcpu_threads"], ",") {
		if got := threadCPUs(t, info.PIDs[0], tid); got != strconv.Itoa(i) {
			t.Errorf("vCPU %d (thread %s) may run on CPUs %q, want %d", i, tid, got, i)
		}
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkDomainGone(t, name, qemu, env.StateDir)
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}

// TestLibvirtArm64Guest boots vfleet's arm64 image as a domain of this
// host's libvirt, which emulates it on aarch64's QEMU as the direct VM
// is: the record says so, the agent answers on the domain's channel, and
// the cpu workload runs; stopping it leaves nothing behind.
func TestLibvirtArm64Guest(t *testing.T) {
	img := emulatedArm64Image(t)
	testutil.RequiresLibvirt(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, guest.Spec{Name: "lv-arm", Kind: KindName, Arch: "arm64", Libvirt: LibvirtSystem}, env)
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Runtime != MachineVirt || info.Details["arch"] != "arm64" || info.Details["accel"] != AccelTCG ||
		info.Details["libvirt_domain"] != domainName(env.RunID, "lv-arm") || len(info.PIDs) != 1 {
		t.Errorf("info = %+v", info)
	}
	qemu, err := procfs.Find(info.PIDs[0])
	if err != nil || !qemu.Alive() {
		t.Fatalf("the domain's QEMU, pid %v: %v", info.PIDs, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemu.PID))
	if err != nil || !strings.Contains(string(cmdline), "qemu-system-aarch64") || !strings.Contains(string(cmdline), archSpecs["arm64"].tcgCPU) {
		t.Errorf("the domain's QEMU (%v): %q", err, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	checkArm64Guest(t, g)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkDomainGone(t, domainName(env.RunID, "lv-arm"), qemu, env.StateDir)
}

// TestLibvirtCancelledStart: a start cancelled before or while the domain
// boots leaves no domain behind.
func TestLibvirtCancelledStart(t *testing.T) {
	testutil.RequiresLibvirt(t)
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := newVM(t, libvirtSpec("lv-c"), env)
	if err := g.Start(ctx); err == nil {
		g.Stop(context.Background())
		t.Fatal("start with a cancelled context succeeded")
	}
	// Cancelled once the domain runs, before its agent answers.
	g = newVM(t, libvirtSpec("lv-d"), env)
	ctx, cancel = context.WithCancel(context.Background())
	name := domainName(env.RunID, "lv-d")
	started := make(chan struct{})
	go func() {
		defer cancel()
		for {
			select {
			case <-started:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if l, err := dialLibvirt(context.Background(), LibvirtSystem, ""); err == nil {
				_, err = l.DomainLookupByName(name)
				l.Close()
				if err == nil {
					return
				}
			}
		}
	}()
	err := g.Start(ctx)
	close(started)
	cancel()
	if stopErr := g.Stop(context.Background()); stopErr != nil {
		t.Errorf("stop after a start cancelled (start err %v): %v", err, stopErr)
	}
	if domainExists(t, name) {
		t.Errorf("domain %s outlived its cancelled start (start err %v)", name, err)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}

// TestLibvirtLedgerUndo: a run that dies leaves its domain running; the
// ledger's undo, as `vfleet clean` runs it, reconnects to the URI and
// removes the domain, its QEMU and its files.
func TestLibvirtLedgerUndo(t *testing.T) {
	testutil.RequiresLibvirt(t)
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, libvirtSpec("lv-u"), env)
	info := startVM(t, g)
	qemu, err := procfs.Find(info.PIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Abandoned: no Stop. Force, since this process, the run's owner,
	// still lives.
	removed, err := ledger.CleanRun(context.Background(), root, "t", ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) == 0 {
		t.Fatal("the ledger held nothing to undo")
	}
	for _, r := range removed {
		if r.Err != nil {
			t.Errorf("undo %s: %v", r.Entry.Describe(), r.Err)
		}
	}
	checkDomainGone(t, domainName(env.RunID, "lv-u"), qemu, env.StateDir)
	// The guest's own stop finds nothing left to do.
	if err := g.Stop(context.Background()); err != nil {
		t.Errorf("stop after the ledger's undo: %v", err)
	}
}

func domainExists(t *testing.T, name string) bool {
	t.Helper()
	l, err := dialLibvirt(context.Background(), LibvirtSystem, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.DomainLookupByName(name)
	if err != nil && !libvirt.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func checkDomainGone(t *testing.T, name string, qemu procfs.Process, stateDir string) {
	t.Helper()
	if domainExists(t, name) {
		t.Errorf("domain %s is still defined", name)
	}
	if qemu.Alive() {
		t.Errorf("the domain's QEMU (pid %d) still runs", qemu.PID)
	}
	if _, err := os.Stat(filepath.Join(libvirtLogDir, name+".log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("libvirt's log of the domain is still there (%v)", err)
	}
	if entries, err := os.ReadDir(stateDir); err == nil && len(entries) > 0 {
		t.Errorf("%s still holds %d entries", stateDir, len(entries))
	}
}

// threadCPUs is the CPU list a thread of pid may run on.
func threadCPUs(t *testing.T, pid int, tid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + tid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// remoteLibvirt is the URI of the libvirt of a remote machine, reached
// over its own sshd: the fixture shares this host's file system, so its
// libvirt is this host's daemon, but vfleet reaches it over real SSH.
func remoteLibvirt(t *testing.T) (uri string, r *testutil.Remote) {
	t.Helper()
	testutil.RequiresLibvirt(t)
	r = testutil.RemoteMachine(t)
	q := url.Values{"keyfile": {r.Identity}, "known_hosts": {r.KnownHosts}}
	return "qemu+ssh://" + r.User + "@" + r.Addr.String() + "/system?" + q.Encode(), r
}

// remoteLeft says what of a guest's domain is left at uri: the domain,
// its pool, its directory on the host, its QEMU.
func remoteLeft(t *testing.T, uri, name string, qemu procfs.Process) []string {
	t.Helper()
	c, err := dialLibvirt(context.Background(), uri, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var left []string
	if _, err := c.DomainLookupByName(name); !libvirt.IsNotFound(err) {
		left = append(left, fmt.Sprintf("domain (%v)", err))
	}
	if _, err := c.StoragePoolLookupByName(name); !noPool(err) {
		left = append(left, fmt.Sprintf("pool (%v)", err))
	}
	if _, err := os.Stat(filepath.Join(remoteLibvirtDir, name)); !errors.Is(err, os.ErrNotExist) {
		left = append(left, fmt.Sprintf("directory (%v)", err))
	}
	if _, err := os.Stat(filepath.Join(libvirtLogDir, name+".log")); !errors.Is(err, os.ErrNotExist) {
		left = append(left, fmt.Sprintf("libvirt's log (%v)", err))
	}
	if qemu.Alive() {
		left = append(left, fmt.Sprintf("QEMU pid %d", qemu.PID))
	}
	return left
}

// TestRemoteLibvirtLifecycle: a guest at a qemu+ssh URI gets its kernel,
// initramfs and base disk uploaded into a pool of its own there, boots,
// runs the cpu workload through its agent's channel reached over the same
// SSH connection, and leaves nothing on that host once stopped.
func TestRemoteLibvirtLifecycle(t *testing.T) {
	uri, _ := remoteLibvirt(t)
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, guest.Spec{Name: "lv-r", Kind: KindName, Accel: AccelTCG, Libvirt: uri}, env)
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	name := domainName(env.RunID, "lv-r")
	pid, _ := strconv.Atoi(info.Details["libvirt_qemu_pid"])
	qemu, err := procfs.Find(pid)
	host, _ := os.Hostname()
	if err != nil || !qemu.Alive() || len(info.PIDs) != 0 || info.Details["libvirt_host_key"] == "" || info.Details["libvirt_host"] != host ||
		info.Details["clock_offset_us"] == "" || info.Details["libvirt_host_cpus"] == "" {
		t.Fatalf("the domain's QEMU, pid %d (%v); info %+v", pid, err, info)
	}
	if d := info.Details["disk_path"]; d != filepath.Join(remoteLibvirtDir, name, "disk.qcow2") {
		t.Errorf("disk %s, want the pool's overlay", d)
	}
	if s := runCPUWorkload(t, g, 1); len(s) == 0 {
		t.Error("the cpu workload measured nothing")
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := remoteLeft(t, uri, name, qemu); len(left) > 0 {
		t.Errorf("left after stop: %v", left)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}

// TestRemoteLibvirtLedgerUndo: a run that dies leaves its remote domain
// and pool; the ledger's undo, as `vfleet clean` runs it, reconnects over
// SSH with the recorded host key and removes them.
func TestRemoteLibvirtLedgerUndo(t *testing.T) {
	uri, _ := remoteLibvirt(t)
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, guest.Spec{Name: "lv-k", Kind: KindName, Accel: AccelTCG, Libvirt: uri}, env)
	info := startVM(t, g)
	pid, _ := strconv.Atoi(info.Details["libvirt_qemu_pid"])
	qemu, err := procfs.Find(pid)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := ledger.CleanRun(context.Background(), root, "t", ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range removed {
		kinds = append(kinds, r.Entry.Kind)
		if r.Err != nil {
			t.Errorf("undo %s: %v", r.Entry.Describe(), r.Err)
		}
	}
	if !slices.Contains(kinds, kindLibvirtPool) || !slices.Contains(kinds, kindLibvirtDomain) {
		t.Errorf("undone %v, want the domain and its pool", kinds)
	}
	if left := remoteLeft(t, uri, domainName(env.RunID, "lv-k"), qemu); len(left) > 0 {
		t.Errorf("left after the ledger's undo: %v", left)
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Errorf("stop after the ledger's undo: %v", err)
	}
}

// TestRemoteLibvirtRefusesAnUnknownHostKey: a host whose key known_hosts
// does not hold is refused before anything starts, saying how to accept
// the key.
func TestRemoteLibvirtRefusesAnUnknownHostKey(t *testing.T) {
	_, r := remoteLibvirt(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"keyfile": {r.Identity}, "known_hosts": {empty}}
	uri := "qemu+ssh://" + r.User + "@" + r.Addr.String() + "/system?" + q.Encode()
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	spec := guest.Spec{Name: "lv-h", Kind: KindName, Accel: AccelTCG, Libvirt: uri}
	err := kind{}.ProbeSpec(context.Background(), spec, env)
	if !errors.Is(err, remote.ErrHostKeyUnknown) || !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), "ssh -o StrictHostKeyChecking=accept-new") {
		t.Errorf("probe: %v", err)
	}
	g := newVM(t, spec, env)
	if err := g.Start(context.Background()); !errors.Is(err, remote.ErrHostKeyUnknown) {
		g.Stop(context.Background())
		t.Errorf("start: %v", err)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger holds %v", p)
	}
}

// TestRemoteLibvirtCancelledStart: a start cancelled while its files are
// uploaded (a Ctrl-C) stops the upload and leaves nothing on the host.
func TestRemoteLibvirtCancelledStart(t *testing.T) {
	uri, _ := remoteLibvirt(t)
	img := testutil.Image(t)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led}
	g := newVM(t, guest.Spec{Name: "lv-x", Kind: KindName, Accel: AccelTCG, Libvirt: uri}, env)
	name := domainName(env.RunID, "lv-x")
	c, err := dialLibvirt(context.Background(), uri, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		defer cancel()
		for {
			select {
			case <-started:
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Cancelled once the pool exists: the uploads are under way.
			if _, err := c.StoragePoolLookupByName(name); err == nil {
				return
			}
		}
	}()
	err = g.Start(ctx)
	close(started)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("start: %v, want it cancelled", err)
	}
	if stopErr := g.Stop(context.Background()); stopErr != nil {
		t.Errorf("stop after a cancelled start: %v", stopErr)
	}
	if left := remoteLeft(t, uri, name, procfs.Process{}); len(left) > 0 {
		t.Errorf("left after a cancelled start: %v", left)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}
