package qemu

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	_ "github.com/vfleet/vfleet/internal/guest/container"
	_ "github.com/vfleet/vfleet/internal/guest/host"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/tools"
)

var update = flag.Bool("update", false, "rewrite the golden QEMU command lines in testdata")

// TestQEMUArgvGolden pins QEMU's command line for each machine and
// accelerator; run with -update after an intended change and review the
// diff.
func TestQEMUArgvGolden(t *testing.T) {
	// The addressing of the second VM on the routed path (netpath.LinkOf).
	routed := &vminit.NetConfig{Addr: netip.MustParsePrefix("198.18.32.6/30"), Gateway: netip.MustParseAddr("198.18.32.5"),
		MAC: net.HardwareAddr{0x02, 0x76, 0x01, 0x00, 0x01, 0x01}}
	for _, c := range []struct {
		machine, accel string
		nic            *vminit.NetConfig
		offloadsOff    bool
	}{
		{MachineQ35, AccelTCG, nil, false}, {MachineQ35, AccelKVM, nil, false}, {MachineMicroVM, AccelTCG, nil, false}, {MachineMicroVM, AccelKVM, nil, false},
		{MachineQ35, AccelTCG, routed, false}, {MachineMicroVM, AccelTCG, routed, false}, {MachineMicroVM, AccelKVM, routed, false},
		{MachineQ35, AccelTCG, routed, true}, // as on the xdp path
		{MachineVirt, AccelTCG, nil, false}, {MachineVirt, AccelKVM, routed, false},
	} {
		arch, console, tscKHz := "amd64", "ttyS0", int64(2300000)
		if c.machine == MachineVirt {
			arch, console, tscKHz = "arm64", "ttyAMA0", 0
		}
		cfg := launchConfig{
			Name: "g", Arch: arch, Machine: c.machine, Accel: c.accel, VCPUs: 2, MemoryMiB: 512,
			Kernel: "/img/boot/vmlinuz", Initramfs: "/img/vm/initramfs.cpio", Disk: "/s/g/disk.qcow2",
			Cmdline:     kernelCmdline(console, "/dev/vda", "g", "/usr/local/bin/vfleet-agent", guest.ScratchDir, tscKHz, c.nic),
			AgentSocket: "/s/g/agent.sock", QMPSocket: "/s/g/qmp.sock", ConsoleLog: "/s/g/console.log",
		}
		name := "argv-" + c.machine + "-" + c.accel
		if c.nic != nil {
			cfg.NIC = &nicConfig{FD: 3, MAC: c.nic.MAC.String()}
			name += "-net"
			if c.accel == AccelKVM {
				cfg.NIC.VhostFD = 4 // vhost-net where the host has it
			}
			if c.offloadsOff {
				cfg.NIC.OffloadsOff = true
				name += "-offloads-off"
			}
		}
		got := strings.Join(qemuArgv(cfg), "\n") + "\n"
		path := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s/%s argv differs from %s:\n%s", c.machine, c.accel, path, got)
		}
	}
}

func TestArgvDiffersOnlyWhereMachinesDo(t *testing.T) {
	q := strings.Join(qemuArgv(launchConfig{Machine: MachineQ35, Accel: AccelKVM, VCPUs: 1, MemoryMiB: 512}), " ")
	m := strings.Join(qemuArgv(launchConfig{Machine: MachineMicroVM, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 512}), " ")
	for _, want := range []string{"-accel kvm", "-cpu host", "virtio-blk-pci", "virtio-serial-pci", "-machine q35"} {
		if !strings.Contains(q, want) {
			t.Errorf("q35/kvm argv lacks %q: %s", want, q)
		}
	}
	for _, want := range []string{"-accel tcg", "-cpu max", "virtio-blk-device", "virtio-serial-device", "-machine microvm"} {
		if !strings.Contains(m, want) {
			t.Errorf("microvm/tcg argv lacks %q: %s", want, m)
		}
	}
	if strings.Contains(m, "-initrd") {
		t.Error("-initrd given without an initramfs")
	}
}

func TestKernelCmdlinePassesInitArgsAfterDashes(t *testing.T) {
	c := kernelCmdline("ttyS0", "/dev/vda", "vm-0", "/usr/local/bin/vfleet-agent", "/var/tmp/vfleet", 0, nil)
	params, initArgs, ok := strings.Cut(c, " -- ")
	if !ok || initArgs != "--pid1 --workdir /var/tmp/vfleet" {
		t.Fatalf("init args: %q", c)
	}
	for _, want := range []string{"root=/dev/vda", "vfleet.hostname=vm-0", "vfleet.port=" + agentPort, "panic=-1", "console=ttyS0"} {
		if !strings.Contains(params, want) {
			t.Errorf("cmdline lacks %s: %s", want, c)
		}
	}
}

// fakeQEMU answers each command with the next reply of a recorded QMP
// session (testdata/qmp-session.jsonl, from QEMU 7.2), events included.
func fakeQEMU(t *testing.T) (path string) {
	t.Helper()
	b, err := os.ReadFile("testdata/qmp-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	path = filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		c.Write([]byte(lines[0]))
		i := 1
		for i < len(lines) {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
			// Send events up to and including the next reply.
			for i < len(lines) {
				line := lines[i]
				i++
				c.Write([]byte(strings.TrimSpace(line) + "\r\n"))
				if !strings.Contains(line, `"event"`) {
					break
				}
			}
		}
	}()
	return path
}

func TestQMPOnRecordedSession(t *testing.T) {
	ctx := context.Background()
	q, err := dialQMP(ctx, fakeQEMU(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	threads, err := q.VCPUThreads(ctx)
	if err != nil || len(threads) != 2 || threads[0] != 9306 || threads[1] != 9307 {
		t.Fatalf("threads = %v, %v", threads, err)
	}
	err = q.execute(ctx, "no-such-command", nil, nil)
	var qe *QMPError
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Fatalf("error reply: %v", err)
	}
	// The POWERDOWN event arrives before the command's reply.
	if err := q.Powerdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestQMPRejectsWhatIsNotQMP(t *testing.T) {
	if err := checkGreeting([]byte(`{"v":1,"agent_version":"dev"}`)); err == nil {
		t.Fatal("an agent hello taken for a QMP greeting")
	}
	if _, done, err := decodeReply([]byte(`{"return": {}, "id": "7"}`), "x", "8"); done || err != nil {
		t.Fatal("a reply to another id was taken")
	}
	if _, done, err := decodeReply([]byte(`not json`), "x", "1"); !done || err == nil {
		t.Fatal("garbage accepted")
	}
	if _, err := parseCPUsFast([]byte(`[{"cpu-index": 3, "thread-id": 5}]`)); err == nil {
		t.Fatal("vCPU index out of range accepted")
	}
}

func TestPanicLineAndHints(t *testing.T) {
	b, err := os.ReadFile("testdata/console-panic.log")
	if err != nil {
		t.Fatal(err)
	}
	if got := PanicLine(b); !strings.HasPrefix(got, "Kernel panic - not syncing: VFS: Unable to mount root fs") {
		t.Fatalf("panic line = %q", got)
	}
	if PanicLine([]byte("Booting\n")) != "" {
		t.Fatal("panic found in a healthy log")
	}
	hang, err := os.ReadFile("testdata/console-microvm-tsc-hang.log")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bootHint(hang), "use runtime q35") || bootHint(b) != "" {
		t.Fatal("clock calibration hint")
	}
	if InitError(b) != "" {
		t.Error("init error found where the kernel panicked on its own")
	}
	netFail, err := os.ReadFile("testdata/console-init-net-fail.log")
	if err != nil {
		t.Fatal(err)
	}
	if got := InitError(netFail); !strings.HasPrefix(got, "network: no interface with MAC 02:76:01:00:00:01") {
		t.Errorf("init error = %q", got)
	}
	if got := tailLines([]byte("a\r\nb\r\nc\r\n"), 2); got != "b\nc" {
		t.Fatalf("tail = %q", got)
	}
}

func TestPins(t *testing.T) {
	if _, err := pinPlan("1", 2); err == nil {
		t.Error("one CPU for two vCPUs accepted")
	}
	if p, err := pinPlan("3,1,2", 2); err != nil || joinInts(p) != "3,1" {
		t.Errorf("pins %v %v", p, err)
	}
}

func TestNewRefusesWhatVMsCannotDo(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	env := guest.Env{StateDir: "/var/lib/vfleet/runs/r/state"}
	for _, spec := range []guest.Spec{
		{Name: "v", Runtime: "firecracker"}, {Name: "v", CPUs: "0"}, {Name: "v", CPULimit: 0.5},
		{Name: "v", NetNS: "/run/netns/x"}, {Name: "v", Accel: "hvf"}, {Name: "v", Own: guest.Own{fieldDisk: "thin"}},
		{Name: "v", VCPUs: 2, PinVCPUs: "1"}, {Name: "v", RTPriority: 100}, {Name: "v", MemoryBytes: 1 << 20},
		{Name: "v", Tap: &guest.TapConfig{Name: "r0", Addr: tapAddr, MAC: tapMAC}},
		{Name: "v", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Addr: tapAddr, MAC: tapMAC}},
		{Name: "v", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, MAC: "02:76"}},
		{Name: "v", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", MAC: tapMAC}},
		{Name: "v", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, MAC: tapMAC, Gateway: netip.MustParseAddr("198.18.0.9")}},
	} {
		if _, err := k.New(spec, env); err == nil {
			t.Errorf("vm accepted %+v", spec)
		}
	}
	if _, err := k.New(guest.Spec{Name: "v"}, guest.Env{StateDir: "/" + strings.Repeat("d", 100)}); err == nil {
		t.Error("a socket path over 107 bytes accepted")
	}
	g, err := k.New(guest.Spec{Name: "v", Runtime: MachineMicroVM, VCPUs: 2, PinVCPUs: "0-1", RTPriority: 10, Accel: AccelKVM, Own: guest.Own{fieldDisk: DiskCopy}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if vm := g.(*Guest); vm.machine != MachineMicroVM || vm.memMiB != 512 || joinInts(vm.pins) != "0,1" || vm.nic != nil {
		t.Fatalf("guest = %+v", vm)
	}
	g, err = k.New(guest.Spec{Name: "v", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, Gateway: tapAddr.Addr().Prev(), MAC: tapMAC}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if nic := g.(*Guest).nic; nic == nil || nic.String() != "198.18.32.2/30,198.18.32.1,"+tapMAC {
		t.Fatalf("nic = %v", nic)
	}
}

// The first VM on the routed path, as netpath.LinkOf addresses it.
var (
	tapAddr = netip.MustParsePrefix("198.18.32.2/30")
	tapMAC  = "02:76:01:00:00:01"
)

func TestOtherKindsRefuseVMFields(t *testing.T) {
	for _, name := range []string{"host", "container"} {
		k, err := guest.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range []guest.Spec{{Name: "g", VCPUs: 2}, {Name: "g", Accel: "tcg"}, {Name: "g", Own: guest.Own{fieldDisk: DiskCopy}}, {Name: "g", PinVCPUs: "0"},
			{Name: "g", Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, MAC: tapMAC}}} {
			if _, err := k.New(spec, guest.Env{}); err == nil {
				t.Errorf("kind %s accepted %+v", name, spec)
			}
		}
	}
}

func TestChooseAccelTCGNeedsNoProbe(t *testing.T) {
	a, _, err := chooseAccel(context.Background(), AccelTCG, tools.Tool{Path: "/nonexistent/qemu"}, "/nonexistent/kernel", "", nil)
	if err != nil || a != AccelTCG {
		t.Fatalf("tcg: %s %v", a, err)
	}
	if _, _, err := chooseAccel(context.Background(), "hvf", tools.Tool{}, "", "", nil); !errors.Is(err, guest.ErrNotSupported) {
		t.Fatalf("unknown accel: %v", err)
	}
}

// The KVM boot probe's answer is kept for its key: the same boot, host
// kernel, QEMU and guest kernel get it without a probe (a "cannot boot"
// says where it came from), any other key probes again, and an interrupted
// probe is no answer.
func TestKVMProbeAnswerIsKeptForItsKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), kvmAnswerFile)
	key := probeKey{BootID: "b1", HostKernel: "6.1.0-18-amd64", QEMU: "/usr/bin/qemu-system-x86_64 7.2.9", KernelSHA256: "aa"}
	probes := 0
	hangs := func(context.Context) error {
		probes++
		return errors.New("boot a kernel under kvm: no boot within 10 s")
	}
	ctx := context.Background()
	if err := rememberedProbe(ctx, file, key, hangs); err == nil || probes != 1 {
		t.Fatalf("first probe: %v after %d probes", err, probes)
	}
	err := rememberedProbe(ctx, file, key, hangs)
	if probes != 1 {
		t.Fatal("a kept answer was probed again")
	}
	if err == nil || !strings.Contains(err.Error(), "no boot within 10 s") || !strings.Contains(err.Error(), "vfleet doctor` probes afresh") {
		t.Fatalf("kept answer said %v", err)
	}
	for field, change := range map[string]func(*probeKey){
		"boot id":     func(k *probeKey) { k.BootID = "b2" },
		"host kernel": func(k *probeKey) { k.HostKernel = "6.1.0-19-amd64" },
		"qemu":        func(k *probeKey) { k.QEMU = "/usr/bin/qemu-system-x86_64 8.0.0" },
		"kernel":      func(k *probeKey) { k.KernelSHA256 = "bb" },
	} {
		other := key
		change(&other)
		before := probes
		if rememberedProbe(ctx, file, other, hangs); probes != before+1 {
			t.Errorf("another %s got the kept answer", field)
		}
	}
	works := func(context.Context) error { probes++; return nil }
	rememberedProbe(ctx, file, key, works)
	before := probes
	if err := rememberedProbe(ctx, file, key, hangs); err != nil || probes != before {
		t.Fatalf("a kept working answer: %v, %d probes", err, probes-before)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	interrupted := func(ctx context.Context) error { probes++; return ctx.Err() }
	key.BootID = "b3"
	rememberedProbe(cancelled, file, key, interrupted)
	before = probes
	if rememberedProbe(ctx, file, key, works); probes != before+1 {
		t.Error("an interrupted probe was kept as an answer")
	}
	if rememberedProbe(ctx, "", key, works); probes != before+2 {
		t.Error("without a file every call must probe")
	}
}

func TestTSCFrequencyReachesTheCmdline(t *testing.T) {
	c := kernelCmdline("ttyS0", "/dev/vda", "g", "/init", "/w", 2300000, nil)
	params, _, _ := strings.Cut(c, " -- ")
	if !strings.Contains(params, "tsc_early_khz=2300000") || !strings.Contains(params, "tsc=reliable") {
		t.Fatalf("cmdline: %s", c)
	}
	if c := kernelCmdline("ttyS0", "/dev/vda", "g", "/init", "/w", 0, nil); strings.Contains(c, "tsc") {
		t.Errorf("without a TSC frequency (KVM: kvmclock): %s", c)
	}
	if runtime.GOARCH == "amd64" && hostTSCkHz() <= 0 {
		t.Fatalf("host TSC frequency = %d kHz", hostTSCkHz())
	}
}

func TestTraitsSayHowAVMDiffers(t *testing.T) {
	want := guest.Traits{Network: guest.NetTap, PinsVCPUs: true, AgentInGuest: true, OwnKernel: true, BootsDisk: true, Security: []string{guest.SecurityUnconfined, guest.SecuritySandbox}}
	if got := guest.TraitsOf(guest.Spec{Kind: KindName}); !reflect.DeepEqual(got, want) {
		t.Errorf("traits of %s = %+v, want %+v", KindName, got, want)
	}
}

func TestVhostNetOnlyUnderKVMAndWhereTheDeviceOpens(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "vhost-net")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		accel, device, want string
		open                bool
	}{
		{AccelKVM, dev, "on", true},
		{AccelTCG, dev, "off: used with KVM only, this VM runs under tcg", false},
		{AccelKVM, filepath.Join(t.TempDir(), "absent"), "is absent (no vhost_net module in this kernel)", false},
	} {
		f, why := openVhostNet(tc.accel, tc.device)
		if (f != nil) != tc.open || !strings.Contains(why, tc.want) {
			t.Errorf("%s with %s: opened %v, %q; want opened %v, %q", tc.accel, tc.device, f != nil, why, tc.open, tc.want)
		}
		if f != nil {
			f.Close()
		}
	}
}

// A template maps its RAM file shared and has a NIC that leads nowhere; a
// clone maps the same file private, waits for its state and keeps TCG's
// translation cache small.
func TestArgvOfTemplatesAndClones(t *testing.T) {
	base := launchConfig{Name: "g", Machine: MachineMicroVM, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256, TranslationMiB: 32}
	tpl := base
	tpl.RAM = &ramFile{Path: "/t/ram", Shared: true}
	tpl.NIC = &nicConfig{MAC: templateMAC, Unplugged: true}
	clone := base
	clone.RAM = &ramFile{Path: "/t/ram"}
	clone.NIC = &nicConfig{FD: 4, MAC: "02:76:01:00:01:01"}
	clone.Incoming = true
	clone.MemoryMerge = true
	clone.Disk, clone.DiskFormat = "/s/g/disk.raw", formatRaw
	for _, c := range []struct {
		cfg       launchConfig
		want, not []string
	}{
		{tpl, []string{"memory-backend=ram", "memory-backend-file,id=ram,size=256M,mem-path=/t/ram,share=on,merge=off", "tcg,tb-size=32", "hubport,id=net0,hubid=0"}, []string{"-incoming", "fd=", "mem-merge"}},
		{clone, []string{"memory-backend-file,id=ram,size=256M,mem-path=/t/ram,share=off,merge=on", "-incoming defer", "tap,id=net0,fd=4",
			"file=/s/g/disk.raw,format=raw"}, []string{"hubport"}},
	} {
		argv := strings.Join(qemuArgv(c.cfg), " ")
		for _, w := range c.want {
			if !strings.Contains(argv, w) {
				t.Errorf("argv lacks %q: %s", w, argv)
			}
		}
		for _, n := range c.not {
			if strings.Contains(argv, n) {
				t.Errorf("argv has %q: %s", n, argv)
			}
		}
	}
}

// A template is booted from its clone's launch but as itself: whatever
// the clone's disk mode, memory merging, resume and card, the template
// boots on its qcow2 overlay, its RAM file shared and out of KSM's reach,
// with a card that leads nowhere.
func TestTemplateConfigIsTheTemplatesOwn(t *testing.T) {
	clone := launchConfig{Name: "g", Machine: MachineMicroVM, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256, TranslationMiB: 32,
		Disk: "/s/g/disk.raw", DiskFormat: formatRaw, MemoryMerge: true, Incoming: true,
		RAM: &ramFile{Path: "/t/ram"}, NIC: &nicConfig{FD: 4, MAC: "02:76:01:00:01:01"}}
	tpl := templateIn("/cache/templates/0123456789ab", "0123456789abcdef")
	cfg := templateConfig(clone, tpl, "/s/template-01234567", templateShape{NIC: true, OffloadsOff: true})
	argv := strings.Join(qemuArgv(cfg), " ")
	for _, w := range []string{"file=/cache/templates/0123456789ab/disk.qcow2,format=qcow2",
		"mem-path=/cache/templates/0123456789ab/ram,share=on,merge=off", "tcg,tb-size=32", "hubport,id=net0,hubid=0",
		"-name vfleet-template-01234567,", "/s/template-01234567/qmp.sock", "csum=off"} {
		if !strings.Contains(argv, w) {
			t.Errorf("template argv lacks %q: %s", w, argv)
		}
	}
	for _, n := range []string{"-incoming", "fd=4", "format=raw", "merge=on", "/s/g/"} {
		if strings.Contains(argv, n) {
			t.Errorf("template argv has %q: %s", n, argv)
		}
	}
}

// removeTemplates takes complete and half-made templates and keeps the
// locks, which a builder waiting for one may hold open.
func TestRemoveTemplates(t *testing.T) {
	boot := t.TempDir()
	root := filepath.Join(boot, templatesDir)
	for _, p := range []string{"aaa/" + templateDone, "aaa.lock", "bbb.partial/" + templateRAM, "bbb.lock"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := removeTemplates(context.Background(), boot)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "aaa"), filepath.Join(root, "bbb.partial")}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	left, _ := os.ReadDir(root)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"aaa.lock", "bbb.lock"}) {
		t.Errorf("left %v, want the two locks", names)
	}
	if removed, err := removeTemplates(context.Background(), t.TempDir()); err != nil || len(removed) > 0 {
		t.Errorf("no templates: %v, %v", removed, err)
	}
}

func TestUserCmdline(t *testing.T) {
	nic := &vminit.NetConfig{Addr: netip.MustParsePrefix("198.18.0.2/30"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	ours := "rdinit=/vfleet/init systemd.hostname=g vfleet.hostname=g vfleet.port=vfleet.agent"
	for _, c := range []struct{ user, want string }{
		{"", "root=/dev/vda rw console=ttyS0 panic=-1 " + ours},
		{"  ", "root=/dev/vda rw console=ttyS0 panic=-1 " + ours},
		// The user's console and panic win; their rdinit runs after the agent.
		{"root=LABEL=r console=ttyAMA0 panic=5 rdinit=/sbin/mine", "root=LABEL=r console=ttyAMA0 panic=5 vfleet.rdinit=/sbin/mine rdinit=/vfleet/init systemd.hostname=g vfleet.hostname=g vfleet.port=vfleet.agent"},
		// Quoted values keep their quotes; init's own words stay last.
		{`root=/dev/vda1 dyndbg="file a.c +p" -- single`, `root=/dev/vda1 dyndbg="file a.c +p" console=ttyS0 panic=-1 ` + ours + " -- single"},
	} {
		if got := userCmdline(c.user, "ttyS0", "g", 0, nil); got != c.want {
			t.Errorf("userCmdline(%q) =\n %s\nwant\n %s", c.user, got, c.want)
		}
	}
	got := userCmdline("", "ttyS0", "g", 2500000, nic)
	for _, want := range []string{"tsc_early_khz=2500000", "tsc=reliable", vminit.ParamNet + "=" + nic.String()} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// What the guest's init reads back is what vfleet meant.
	p := vminit.ParseCmdline(userCmdline("root=/dev/vda1 rdinit=/sbin/mine", "ttyS0", "web-3", 0, nil))
	if p["rdinit"] != vminit.BesideInitPath || p[vminit.ParamNextInit] != "/sbin/mine" || p[vminit.ParamHostname] != "web-3" || p["root"] != "/dev/vda1" {
		t.Errorf("parsed back: %v", p)
	}
}

func TestCheckUserBoot(t *testing.T) {
	kernel := guest.KernelBoot{Kernel: "/k"}
	for _, c := range []struct {
		spec guest.Spec
		err  string
	}{
		{guest.Spec{}, ""},
		{guest.Spec{Image: "/d.qcow2", Boot: kernel}, ""},
		{guest.Spec{Image: "/d.qcow2", Boot: guest.KernelBoot{Kernel: "/k", Initrd: "/i", Cmdline: "root=/dev/vda1 ro"}}, ""},
		{guest.Spec{Boot: kernel}, "give image"},
		{guest.Spec{Boot: guest.KernelBoot{Cmdline: "quiet"}}, "give image"},
		{guest.Spec{Image: "/d.qcow2"}, "either with the user's kernel (kernel:"},
		{guest.Spec{Image: "/d.qcow2", Boot: guest.KernelBoot{Initrd: "/i"}}, "either with the user's kernel (kernel:"},
		{guest.Spec{Image: "/d.qcow2", Firmware: guest.FirmwareUEFI}, ""},
		{guest.Spec{Firmware: guest.FirmwareUEFI}, "give image"},
		{guest.Spec{Image: "/d.qcow2", Firmware: guest.FirmwareUEFI, Boot: kernel}, "remove kernel, initrd and cmdline"},
		{guest.Spec{Image: "/d.qcow2", Boot: kernel, Launch: LaunchClone}, "launch: clone is for vfleet's own image"},
		{guest.Spec{Image: "/d.qcow2", Boot: guest.KernelBoot{Kernel: "/k", Cmdline: "root=/dev/vda vfleet.port=x"}}, `"vfleet.port=x": names starting "vfleet." are vfleet's own`},
		{guest.Spec{Image: "/d.qcow2", Boot: guest.KernelBoot{Kernel: "/k", Cmdline: `root=/dev/vda x="y`}}, "unclosed double quote"},
		{guest.Spec{Image: "/d.qcow2", Boot: guest.KernelBoot{Kernel: "/k", Cmdline: strings.Repeat("x", 2000)}}, "at most 1536 fit"},
	} {
		err := checkUserBoot(c.spec)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: error %v, want %q", c.spec, err, c.err)
		}
	}
}

func TestGoCrash(t *testing.T) {
	b, err := os.ReadFile("testdata/console-agent-stdfds-crash.log")
	if err != nil {
		t.Fatal(err)
	}
	if got := GoCrash(b); got != "fatal error: cannot open standard fds" {
		t.Errorf("GoCrash = %q", got)
	}
	panicked, err := os.ReadFile("testdata/console-panic.log")
	if err != nil {
		t.Fatal(err)
	}
	if got := GoCrash(panicked); got != "" {
		t.Errorf("a kernel's panic taken for the agent's crash: %q", got)
	}
}

func TestSeedHint(t *testing.T) {
	panicked, err := os.ReadFile("testdata/console-panic.log")
	if err != nil {
		t.Fatal(err)
	}
	if h := seedHint(panicked); !strings.Contains(h, "needs cloud-init") {
		t.Errorf("a console without cloud-init: hint %q", h)
	}
	ran := []byte("[   41.5] cloud-init[403]: Cloud-init v. 22.4.2 finished. Datasource DataSourceNoCloud [seed=/dev/vdb]\n")
	if h := seedHint(ran); h != "" {
		t.Errorf("cloud-init ran, yet hint %q", h)
	}
}

func TestSeedUserData(t *testing.T) {
	files := seedFiles("web-1", "vfleet.hostname=web-1 vfleet.port=vfleet.agent")
	ud := files["user-data"]
	if !strings.HasPrefix(ud, "#cloud-config\nbootcmd:\n") || !strings.Contains(ud, "mount -o ro -L cidata /run/vfleet-seed") ||
		!strings.Contains(ud, "/run/vfleet-seed/vfleet-agent "+vminit.SeedParamsArg+" /run/vfleet-seed/vfleet-params") {
		t.Errorf("user-data:\n%s", ud)
	}
	if files["meta-data"] != "instance-id: vfleet-web-1\nlocal-hostname: web-1\n" {
		t.Errorf("meta-data: %q", files["meta-data"])
	}
	if p := vminit.ParseCmdline(files["vfleet-params"]); p[vminit.ParamHostname] != "web-1" || p[vminit.ParamPort] != agentPort {
		t.Errorf("params read back: %v", p)
	}
}

// A UEFI boot has the firmware's two flash drives instead of a kernel,
// boots its root disk first, and carries the seed as a second disk.
func TestQEMUArgvUEFI(t *testing.T) {
	for _, c := range []struct{ arch, machine, code string }{
		{"amd64", MachineQ35, archSpecs["amd64"].uefi.code}, {"arm64", MachineVirt, archSpecs["arm64"].uefi.code},
	} {
		a := strings.Join(qemuArgv(launchConfig{Name: "g", Arch: c.arch, Machine: c.machine, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 512,
			Firmware: &firmwareFiles{Code: c.code, Vars: "/s/g/efivars.fd"}, Seed: "/s/g/seed.iso", Disk: "/s/g/disk.qcow2",
			AgentSocket: "/s/g/agent.sock", QMPSocket: "/s/g/qmp.sock", ConsoleLog: "/s/g/console.log"}), " ")
		for _, want := range []string{"-drive if=pflash,format=raw,unit=0,readonly=on,file=" + c.code, "-drive if=pflash,format=raw,unit=1,file=/s/g/efivars.fd",
			"virtio-blk-pci,drive=root,bootindex=0", "-drive file=/s/g/seed.iso,format=raw,if=none,id=seed,readonly=on -device virtio-blk-pci,drive=seed"} {
			if !strings.Contains(a, want) {
				t.Errorf("%s argv lacks %q:\n%s", c.arch, want, a)
			}
		}
		for _, never := range []string{"-kernel", "-initrd", "-append"} {
			if strings.Contains(a, never) {
				t.Errorf("%s argv has %s:\n%s", c.arch, never, a)
			}
		}
	}
}

// stopMonitor is a QEMU monitor whose guest powers off when its power
// button is pressed; it counts the presses.
type stopMonitor struct {
	exited  chan struct{}
	once    sync.Once
	presses int
}

func (m *stopMonitor) exit() { m.once.Do(func() { close(m.exited) }) }

func (m *stopMonitor) VCPUThreads(context.Context) ([]int, error) { return nil, nil }
func (m *stopMonitor) Powerdown(context.Context) error            { m.presses++; m.exit(); return nil }
func (m *stopMonitor) Quit(context.Context) error                 { m.exit(); return nil }
func (m *stopMonitor) Close() error                               { return nil }

// A booted guest is asked to power off; a paused one (a template whose
// state is saved) cannot answer the button, so QEMU is told to quit at
// once instead of after powerdownWait.
func TestStopPressesThePowerButtonOnlyForARunningGuest(t *testing.T) {
	for paused, want := range map[bool]int{false: 1, true: 0} {
		mon := &stopMonitor{exited: make(chan struct{})}
		m := &vm{mon: mon, exited: mon.exited, booted: true, paused: paused}
		m.stop()
		if mon.presses != want {
			t.Errorf("paused %v: power button pressed %d times, want %d", paused, mon.presses, want)
		}
	}
}

// A QEMU that exits at once is reaped before it can be recorded: the
// error is what QEMU said, not that its /proc entry is gone. One still
// running keeps the recording's own error.
func TestQEMUThatExitsAtOnceSaysWhy(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "qemu-system-x86_64")
	script := "#!/bin/sh\necho 'qemu-system-x86_64: -machine microvm,x-option-roms=off: Property not found' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "qemu.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake)
	cmd.Stdout, cmd.Stderr = logf, logf
	m := &vm{cmd: cmd, exited: make(chan struct{})}
	m.err = cmd.Run()
	logf.Close()
	close(m.exited)
	recErr := fmt.Errorf("record process: process %d: read /proc/%d/stat: %w", cmd.Process.Pid, cmd.Process.Pid, syscall.ESRCH)
	err = unrecorded(m, logPath, recErr)
	if err == nil || !strings.Contains(err.Error(), "Property not found") || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("QEMU that exited at once: %v", err)
	}
	running := &vm{exited: make(chan struct{})}
	if err := unrecorded(running, logPath, recErr); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("QEMU still running: %v, want the recording's error", err)
	}
}

// A card on passt's socket is a stream netdev on the descriptor vfleet
// connected, never a tap, and has no vhost.
func TestArgvOfACardOnPasst(t *testing.T) {
	for _, machine := range []string{MachineQ35, MachineMicroVM} {
		cfg := launchConfig{Name: "g", Machine: machine, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256,
			NIC: &nicConfig{FD: 5, MAC: "02:76:09:00:00:01", Stream: true}}
		argv := strings.Join(qemuArgv(cfg), " ")
		if !strings.Contains(argv, "-netdev stream,id=net0,server=off,addr.type=fd,addr.str=5 ") {
			t.Errorf("%s: argv lacks the stream netdev on descriptor 5: %s", machine, argv)
		}
		if strings.Contains(argv, "tap,") || strings.Contains(argv, "vhost") {
			t.Errorf("%s: argv has a tap or vhost: %s", machine, argv)
		}
		if !strings.Contains(argv, "netdev=net0,mac=02:76:09:00:00:01") {
			t.Errorf("%s: argv lacks the card on the stream: %s", machine, argv)
		}
	}
}

// A PCI device lent to the VM is QEMU's vfio-pci device at its address,
// with no netdev, MAC, vhost or option ROM of vfleet's; a VM that cannot
// hold one is refused before it starts.
func TestArgvOfALentDevice(t *testing.T) {
	cfg := launchConfig{Name: "g", Machine: MachineQ35, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256,
		NIC: &nicConfig{MAC: "00:1b:21:aa:bb:01", VFIO: "0000:03:00.1"}}
	argv := qemuArgv(cfg)
	if i := slices.Index(argv, "vfio-pci,host=0000:03:00.1,id=net0,rombar=0"); i < 1 || argv[i-1] != "-device" {
		t.Errorf("argv lacks the lent device: %v", argv)
	}
	if s := strings.Join(argv, " "); strings.Contains(s, "-netdev") || strings.Contains(s, "virtio-net") || strings.Contains(s, "mac=") {
		t.Errorf("argv has a netdev or a virtio card beside the lent device: %s", s)
	}
	tap := &guest.TapConfig{NSPath: "/run/netns/hs", Name: "0000:03:00.1", Addr: netip.MustParsePrefix("198.19.192.16/19"), MAC: "00:1b:21:aa:bb:01"}
	for _, tc := range []struct {
		spec guest.Spec
		want string
	}{
		{guest.Spec{Runtime: MachineMicroVM}, "no PCI bus"},
		{guest.Spec{Launch: LaunchClone}, "use launch boot"},
		{guest.Spec{Security: guest.SecuritySandbox}, "remove security"},
		{guest.Spec{}, ""},
	} {
		tc.spec.Name, tc.spec.Kind, tc.spec.Tap = "p", KindName, tap
		_, err := (kind{}).New(tc.spec, guest.Env{})
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}
