package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/testutil"
)

// userDiskGuest makes a guest of the foreign disk booted with its own
// kernel and initrd; cmdline is the user's, tap its NIC or nil. Its state
// lives under root, and its ledger must be empty once the test is done.
func userDiskGuest(t *testing.T, name, cmdline string, tap *guest.TapConfig, root string, led *ledger.Ledger) (guest.Guest, testutil.ForeignDisk) {
	t.Helper()
	return userDiskGuestOf(t, guest.Spec{Name: name, Tap: tap, Boot: guest.KernelBoot{Cmdline: cmdline}}, root, led)
}

// userDiskGuestOf is userDiskGuest of a spec that says more: the disk,
// its kernel and initrd are filled in.
func userDiskGuestOf(t *testing.T, spec guest.Spec, root string, led *ledger.Ledger) (guest.Guest, testutil.ForeignDisk) {
	t.Helper()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	disk := testutil.ForeignVM(t)
	img := testutil.Image(t)
	spec.Kind, spec.Accel, spec.Image = KindName, AccelTCG, disk.QCOW2
	spec.Boot.Kernel, spec.Boot.Initrd = disk.Kernel, disk.Initrd
	g := newVM(t, spec,
		guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: testutil.BuildAgent(t), StateDir: root + "/state", Ledger: led})
	return g, disk
}

// TestUserDiskBootsItsOwnInit boots a disk that is not vfleet's (systemd,
// no agent) with the kernel and initrd it carries, on the bridge path: the
// agent comes up beside the image's own init and configures the NIC the
// image's udev brings up late, the guest has its own identity and the
// image's tools, exchanges data with the peer both ways, and the user's
// disk is never written. (One boot for all of it: each costs seconds of
// TCG.)
func TestUserDiskBootsItsOwnInit(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	ctx := context.Background()
	n, err := netpath.Create(ctx, netpath.Options{RunKey: testutil.RunID(t), Ledger: led, Paths: []netpath.Path{netpath.Bridge}, StateDir: root})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	port := exchangeServer(t, n.PeerNS())
	link, err := n.AttachTap("foreign-vm", netpath.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	tap := &guest.TapConfig{NSPath: n.HostSide(), Name: link.HostIf, Addr: link.Addr, Gateway: link.Gateway, MAC: link.MAC.String()}
	g, disk := userDiskGuest(t, "foreign-vm", "", tap, root, led)
	was, err := os.Stat(disk.QCOW2)
	if err != nil {
		t.Fatal(err)
	}
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Details["image"] != disk.QCOW2 || info.Details["image_format"] != "qcow2" || info.Details["kernel"] != disk.Kernel {
		t.Errorf("details = %v", info.Details)
	}
	run := func(argv ...string) string {
		t.Helper()
		r, err := g.Exec(ctx, agent.Request{Argv: argv, TimeoutMS: 60_000})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%v in the guest: %v, exit %d, %s", argv, err, r.ExitCode, r.Stderr)
		}
		return strings.TrimSpace(string(r.Stdout))
	}
	if init := run("cat", "/proc/1/comm"); init != "systemd" {
		t.Errorf("PID 1 is %q, want the image's systemd", init)
	}
	if h := run("hostname"); h != "foreign-vm" {
		t.Errorf("hostname = %q", h)
	}
	if hosts := run("getent", "hosts", "foreign-vm", "localhost"); !strings.Contains(hosts, "foreign-vm") || !strings.Contains(hosts, "localhost") {
		t.Errorf("the guest does not resolve its name and localhost: %q", hosts)
	}
	if out := run("sysbench", "cpu", "--time=1", "run"); !strings.Contains(out, "events per second") {
		t.Errorf("sysbench in the image: %q", out)
	}
	exchange := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && head -c %d /dev/zero >&3 && head -c %d <&3 | wc -c", link.Peer, port, exchangeBytes, exchangeBytes)
	if got := run("bash", "-c", exchange); got != strconv.Itoa(exchangeBytes) {
		t.Errorf("TCP exchange with the peer %s: %s bytes back, want %d", link.Peer, got, exchangeBytes)
	}
	run("sh", "-c", "echo guest > /root/written-by-the-guest && sync")
	if r, err := g.Exec(ctx, agent.Request{Op: agent.OpLookPath, Arg: "stress-ng"}); err != nil || r.ExitCode == 0 {
		t.Errorf("stress-ng, which the image lacks, was found: %v %+v", err, r)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := os.Stat(disk.QCOW2)
	if err != nil {
		t.Fatal(err)
	}
	if !now.ModTime().Equal(was.ModTime()) || now.Size() != was.Size() {
		t.Errorf("the user's disk changed: %v %d bytes, was %v %d", now.ModTime(), now.Size(), was.ModTime(), was.Size())
	}
}

// TestUserDiskThatNeverBringsTheAgentUp fails its start with what the
// console said: the initrd cannot mount the root file system it was told
// to (a missing root device would do too, after the initrd's 30 s wait).
func TestUserDiskThatNeverBringsTheAgentUp(t *testing.T) {
	testutil.SharesMachine(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	g, _ := userDiskGuest(t, "no-root", "root=/dev/vda rootfstype=nosuchfs rw", nil, root, led)
	err := g.Start(context.Background())
	if err == nil {
		g.Stop(context.Background())
		t.Fatal("a guest without its root file system started")
	}
	t.Log(err)
	if !errors.Is(err, ErrBootFailed) || !strings.Contains(err.Error(), "Failed to mount /dev/vda") {
		t.Errorf("error = %v, want ErrBootFailed quoting the console on the failed mount", err)
	}
}

// TestUserDiskThroughUEFI boots a GPT disk through OVMF and the disk's
// own boot loader: the agent arrives from a cloud-init seed and serves
// beside systemd, with the guest's own name.
func TestUserDiskThroughUEFI(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.RequiresTool(t, "genisoimage", "genisoimage")
	disk := testutil.ForeignUEFI(t)
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	g := newVM(t, guest.Spec{Name: "uefi-vm", Kind: KindName, Accel: AccelTCG, Image: disk.QCOW2, Firmware: guest.FirmwareUEFI},
		guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: testutil.BuildAgent(t), StateDir: root + "/state", Ledger: led})
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	if !strings.HasPrefix(info.Details["firmware"], "uefi") || info.Details["agent_via"] != "cloud-init NoCloud seed" {
		t.Errorf("details = %v", info.Details)
	}
	for argv, want := range map[string]string{"cat /proc/1/comm": "systemd", "hostname": "uefi-vm", "test -d /sys/firmware/efi": ""} {
		r, err := g.Exec(ctx, agent.Request{Argv: strings.Fields(argv), TimeoutMS: 30_000})
		if err != nil || r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != want {
			t.Errorf("%s in the guest: %v, exit %d, %q, want %q", argv, err, r.ExitCode, r.Stdout, want)
		}
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
