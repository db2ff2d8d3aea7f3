package qemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/remote"
)

func TestNewRefusesWhatLibvirtCannotDo(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	env := guest.Env{StateDir: "/var/lib/vfleet/runs/r/state"}
	for why, spec := range map[string]guest.Spec{
		"microvm":            {Runtime: MachineMicroVM},
		"session":            {Libvirt: "qemu:///session"},
		"unchecked host key": {Libvirt: "qemu+ssh://root@lab2/system?no_verify=1"},
		"clone":              {Launch: LaunchClone},
		"sandbox":            {Security: guest.SecuritySandbox},
		"nic":                {Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, Gateway: tapAddr.Addr().Prev(), MAC: tapMAC}},
	} {
		spec.Name, spec.Libvirt = "v", cmp.Or(spec.Libvirt, LibvirtSystem)
		if _, err := k.New(spec, env); err == nil {
			t.Errorf("%s: a libvirt-managed vm accepted %+v", why, spec)
		}
	}
	const lab2 = "qemu+ssh://root@lab2/system"
	for why, c := range map[string]struct {
		spec guest.Spec
		env  guest.Env
		want string
	}{
		"nic":      {guest.Spec{Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, Gateway: tapAddr.Addr().Prev(), MAC: tapMAC}}, env, "the path is on this one"},
		"pins":     {guest.Spec{VCPUs: 2, PinVCPUs: "0-1"}, env, "this host's CPUs"},
		"realtime": {guest.Spec{RTPriority: 10}, env, "this host's CPUs"},
		"copy":     {guest.Spec{Own: guest.Own{fieldDisk: DiskCopy}}, env, "use disk overlay"},
		"image":    {guest.Spec{Image: "/srv/disk.qcow2", Boot: guest.KernelBoot{Kernel: "/srv/vmlinuz"}}, env, "not uploaded"},
		"fleet":    {guest.Spec{}, guest.Env{StateDir: env.StateDir, Detached: true}, "fleet up"},
		"arm64":    {guest.Spec{Arch: "arm64"}, env, "this host's libvirt only"},
	} {
		c.spec.Name, c.spec.Libvirt = "v", lab2
		_, err := k.New(c.spec, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), lab2) {
			t.Errorf("%s on a remote libvirt: %v, want %q", why, err, c.want)
		}
	}
	key := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.New(guest.Spec{Name: "v", Libvirt: lab2 + "?keyfile=" + key}, env); err != nil {
		t.Errorf("a remote libvirt: %v", err)
	}
	// The run makes a local domain's tap in this host's namespace; a
	// direct VM's comes from the host side only.
	rootTap := &guest.TapConfig{Name: "vfrt0", Addr: tapAddr, Gateway: tapAddr.Addr().Prev(), MAC: tapMAC, Root: true}
	if _, err := k.New(guest.Spec{Name: "v", Libvirt: LibvirtSystem, Tap: rootTap}, env); err != nil {
		t.Errorf("a local domain on a tap in this host's namespace: %v", err)
	}
	if _, err := k.New(guest.Spec{Name: "v", Tap: rootTap}, env); err == nil {
		t.Error("a direct VM took a tap in this host's namespace")
	}
	for spec, want := range map[string]bool{LibvirtSystem: true, "": false} {
		if root, err := (kind{}).TapsInRoot(guest.Spec{Libvirt: spec}); root != want || err != nil {
			t.Errorf("libvirt %q: taps in this host's namespace %v (%v), want %v", spec, root, err, want)
		}
	}
	if _, err := (kind{}).TapsInRoot(guest.Spec{Libvirt: lab2}); !errors.Is(err, errRemoteNIC) {
		t.Errorf("a remote domain on the run's path: %v", err)
	}
	_, err := k.New(guest.Spec{Name: "v", Runtime: MachineMicroVM, Libvirt: LibvirtSystem}, env)
	if err == nil || !strings.Contains(err.Error(), "No PCI buses available") {
		t.Errorf("microvm under libvirt: %v, want libvirt's own reason", err)
	}
	g, err := k.New(guest.Spec{Name: "v", VCPUs: 2, PinVCPUs: "0-1", RTPriority: 10, Libvirt: LibvirtSystem}, env)
	if err != nil {
		t.Fatal(err)
	}
	if vm := g.(*Guest); vm.libvirt != LibvirtSystem || vm.machine != MachineQ35 {
		t.Fatalf("guest = %+v", vm)
	}
	if image.HostArch == "amd64" {
		g, err := k.New(guest.Spec{Name: "v", Arch: "arm64", Libvirt: LibvirtSystem}, env)
		if err != nil {
			t.Fatalf("an emulated arm64 guest under this host's libvirt: %v", err)
		}
		if vm := g.(*Guest); vm.machine != MachineVirt || filepath.Base(vm.qemu.Path) != "qemu-system-aarch64" {
			t.Errorf("arm64 guest = %+v", vm)
		}
	}
}

// TestDomainXMLOfAnArm64Guest: an emulated arm64 guest is the direct
// arm64 VM's machine and CPU on aarch64's QEMU, booting its kernel from
// the device tree (no ACPI, which libvirt allows on aarch64 with UEFI
// only) on the console the kernel names ttyAMA0.
func TestDomainXMLOfAnArm64Guest(t *testing.T) {
	c := launchConfig{
		Name: "a-0", Arch: "arm64", Machine: MachineVirt, Accel: AccelTCG, VCPUs: 2, MemoryMiB: 512,
		Kernel: "/img/vmlinuz", Initramfs: "/img/initrd", Cmdline: "console=ttyAMA0",
		Disk: "/st/a-0/disk.qcow2", DiskFormat: formatQCOW2, AgentSocket: "/st/a-0/agent.sock", ConsoleLog: "/st/a-0/console.log",
	}
	domain := func(c launchConfig) (libvirtxml.Domain, string) {
		t.Helper()
		doc, err := domainXML("vfleet-r1-a-0", "r1", "/usr/bin/qemu-system-aarch64", c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var d libvirtxml.Domain
		if err := d.Unmarshal(doc); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		return d, doc
	}
	d, doc := domain(c)
	if d.Type != "qemu" || d.OS.Type.Arch != "aarch64" || d.OS.Type.Machine != MachineVirt || d.Devices.Emulator != "/usr/bin/qemu-system-aarch64" ||
		d.OS.Kernel != c.Kernel || d.OS.Initrd != c.Initramfs || d.OS.Cmdline != c.Cmdline {
		t.Errorf("domain:\n%s", doc)
	}
	if cpu := d.CPU; cpu.Mode != "custom" || cpu.Model == nil || cpu.Model.Value != archSpecs["arm64"].tcgCPU || cpu.Model.Fallback != "forbid" {
		t.Errorf("cpu %+v, want the direct VM's %s", cpu, archSpecs["arm64"].tcgCPU)
	}
	if f := d.Features; f.ACPI != nil || f.GIC == nil || f.GIC.Version != "3" {
		t.Errorf("features %+v, want GICv3 and no ACPI", f)
	}
	if ch := d.Devices.Channels; len(ch) != 1 || ch[0].Target.VirtIO.Name != agentPort {
		t.Errorf("agent channel %+v", ch)
	}
	c.Firmware = &firmwareFiles{Code: archSpecs["arm64"].uefi.code, Vars: "/st/a-0/vars.fd"}
	if d, doc := domain(c); d.Features.ACPI == nil || d.OS.Loader == nil || d.OS.Loader.Path != c.Firmware.Code {
		t.Errorf("an arm64 guest through UEFI:\n%s", doc)
	}
	c.Firmware, c.Accel = nil, AccelKVM
	if d, doc := domain(c); d.Type != "kvm" || d.CPU.Mode != "host-passthrough" || d.Features.GIC.Version != "host" {
		t.Errorf("an arm64 guest under KVM:\n%s", doc)
	}
}

// TestDomainXMLIsTheDirectVMsShape: the domain boots what the direct VM's
// argv boots, under a static DAC label that relabels nothing, and names
// its run.
func TestDomainXMLIsTheDirectVMsShape(t *testing.T) {
	c := launchConfig{
		Name: "g-0", Machine: MachineQ35, Accel: AccelTCG, VCPUs: 2, MemoryMiB: 256,
		Kernel: "/img/vmlinuz", Initramfs: "/img/initrd", Cmdline: "console=ttyS0 vfleet.x=1",
		Disk: "/st/g-0/disk.qcow2", DiskFormat: formatQCOW2, AgentSocket: "/st/g-0/agent.sock", ConsoleLog: "/st/g-0/console.log",
	}
	doc, err := domainXML("vfleet-r1-g-0", "r1", "/usr/bin/qemu-system-x86_64", c, []int{3, 5}, 7)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if d.Type != "qemu" || d.Name != "vfleet-r1-g-0" || d.OS.Type.Machine != MachineQ35 || d.OS.Kernel != c.Kernel ||
		d.OS.Initrd != c.Initramfs || d.OS.Cmdline != c.Cmdline || d.Memory.Value != 256 || d.Memory.Unit != "MiB" || d.VCPU.Value != 2 {
		t.Errorf("domain:\n%s", doc)
	}
	if !strings.Contains(d.Metadata.XML, `id="r1"`) || !strings.Contains(d.Metadata.XML, libvirtNamespace) {
		t.Errorf("metadata %q does not name the run", d.Metadata.XML)
	}
	if l := d.SecLabel; len(l) != 1 || l[0].Type != "static" || l[0].Model != "dac" || l[0].Relabel != "no" || l[0].Label != "+0:+0" {
		t.Errorf("seclabel %+v", l)
	}
	if p := d.CPUTune.VCPUPin; len(p) != 2 || p[0].CPUSet != "3" || p[1].VCPU != 1 || p[1].CPUSet != "5" {
		t.Errorf("vcpupin %+v", p)
	}
	if s := d.CPUTune.VCPUSched; len(s) != 1 || s[0].Scheduler != "fifo" || *s[0].Priority != 7 || s[0].VCPUs != "0-1" {
		t.Errorf("vcpusched %+v", s)
	}
	dev := d.Devices
	if len(dev.Channels) != 1 || dev.Channels[0].Target.VirtIO.Name != agentPort || dev.Channels[0].Source.UNIX.Path != c.AgentSocket {
		t.Errorf("agent channel %+v", dev.Channels)
	}
	if len(dev.Disks) != 1 || dev.Disks[0].Source.File.File != c.Disk || dev.Disks[0].Driver.Type != formatQCOW2 {
		t.Errorf("disks %+v", dev.Disks)
	}
	if len(dev.Serials) != 1 || dev.Serials[0].Source.File.Path != c.ConsoleLog {
		t.Errorf("serials %+v", dev.Serials)
	}
	if d.MemoryBacking == nil || d.MemoryBacking.MemoryNosharepages == nil {
		t.Error("memory not kept from KSM, unlike the direct VM's mem-merge=off")
	}
	if d.OnPoweroff != "destroy" || d.OnReboot != "destroy" {
		t.Errorf("on_poweroff %q on_reboot %q", d.OnPoweroff, d.OnReboot)
	}
}

func TestDoctorSaysWhenLibvirtRunsANetwork(t *testing.T) {
	r := libvirtVerdict(9000000, []string{"default"}, nil)
	if r.Status != doctor.Warn || !strings.Contains(r.Detail, "libvirt 9.0.0 runs network default") || !strings.Contains(r.Fix, "net-autostart --disable") {
		t.Errorf("an active network: %+v", r)
	}
	if r := libvirtVerdict(9000000, nil, nil); r.Status != doctor.OK {
		t.Errorf("no network: %+v", r)
	}
	if r := libvirtVerdict(0, nil, errors.New("connection refused")); r.Status != doctor.Warn || r.Fix == "" {
		t.Errorf("no daemon: %+v", r)
	}
}

// A scenario's libvirt group on a host whose libvirt does not answer is
// refused before the run starts anything (an optional group is dropped).
func TestProbeSpecRefusesALibvirtThatDoesNotAnswer(t *testing.T) {
	defer func(s string) { libvirtSocket = s }(libvirtSocket)
	libvirtSocket = filepath.Join(t.TempDir(), "libvirt-sock")
	err := kind{}.ProbeSpec(context.Background(), guest.Spec{Name: "v", Libvirt: LibvirtSystem}, guest.Env{})
	if !errors.Is(err, guest.ErrNotSupported) || !errors.Is(err, ErrLibvirt) {
		t.Fatalf("ProbeSpec = %v, want guest.ErrNotSupported and ErrLibvirt", err)
	}
}

// TestParseLibvirtURI: a qemu+ssh URI is the SSH target and settings
// internal/remote dials with, and libvirt's socket there.
func TestParseLibvirtURI(t *testing.T) {
	u, err := parseLibvirtURI("qemu+ssh://ops@[2001:db8::2]:2222/system?keyfile=/k/id&known_hosts=/k/kh&socket=/run/lv.sock&no_verify=0")
	if err != nil {
		t.Fatal(err)
	}
	want := libvirtURI{URI: u.URI, Remote: true, Target: remote.Target{User: "ops", Host: "2001:db8::2", Port: 2222},
		SSH: remote.Config{Identity: "/k/id", KnownHosts: "/k/kh"}, Socket: "/run/lv.sock"}
	if u != want {
		t.Errorf("parsed %+v, want %+v", u, want)
	}
	if u, err := parseLibvirtURI("qemu+ssh://root@lab2/system"); err != nil || u.Target.Port != remote.DefaultPort || u.Socket != remoteLibvirtSocket {
		t.Errorf("defaults: %+v %v", u, err)
	}
	if u, err := parseLibvirtURI(LibvirtSystem); err != nil || u.Remote {
		t.Errorf("%s: %+v %v", LibvirtSystem, u, err)
	}
	for _, bad := range []string{
		"qemu+ssh://root:pw@lab2/system", "qemu+ssh://root@lab2:0/system", "qemu+ssh://root@/system",
		"qemu+ssh://root@lab2/system?socket=run/x", "qemu+ssh://root@lab2/system?keyfile=", "qemu+ssh://root@lab2/system?keyfile=/a&keyfile=/b",
		"qemu+ssh://root@lab2/system#x", "qemu+ssh://root@lab2/system?no_verify=1", "qemu+ssh://root@lab2/system?known_hosts_verify=ignore",
	} {
		if _, err := parseLibvirtURI(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestAccelOfCaps: a remote guest's accelerator is what that host's
// libvirt offers, never this host's probe.
func TestAccelOfCaps(t *testing.T) {
	caps := func(types ...string) libvirtxml.Caps {
		var ds []libvirtxml.CapsGuestDomain
		for _, ty := range types {
			ds = append(ds, libvirtxml.CapsGuestDomain{Type: ty})
		}
		return libvirtxml.Caps{Guests: []libvirtxml.CapsGuest{
			{OSType: "hvm", Arch: libvirtxml.CapsGuestArch{Name: "aarch64", Domains: []libvirtxml.CapsGuestDomain{{Type: "kvm"}}}},
			{OSType: "hvm", Arch: libvirtxml.CapsGuestArch{Name: "x86_64", Domains: ds}},
		}}
	}
	for _, c := range []struct {
		caps      libvirtxml.Caps
		want, got string
	}{
		{caps("qemu", "kvm"), AccelAuto, AccelKVM},
		{caps("qemu", "kvm"), AccelTCG, AccelTCG},
		{caps("qemu", "kvm"), AccelKVM, AccelKVM},
		{caps("qemu"), AccelAuto, AccelTCG},
		{caps("qemu"), "", AccelTCG},
	} {
		if accel, _, err := accelOfCaps(c.caps, c.want, "u"); err != nil || accel != c.got {
			t.Errorf("%+v asked %q: %s %v, want %s", c.caps.Guests[1].Arch.Domains, c.want, accel, err, c.got)
		}
	}
	if _, _, err := accelOfCaps(caps("qemu"), AccelKVM, "u"); !errors.Is(err, ErrLibvirtHost) {
		t.Errorf("kvm asked of a host without: %v", err)
	}
	if _, _, err := accelOfCaps(caps(), AccelAuto, "u"); !errors.Is(err, ErrLibvirtHost) {
		t.Errorf("a host without x86_64 guests: %v", err)
	}
}

// TestUploadStopsWithItsContext: an upload's reader ends with its
// context, which aborts libvirt's stream instead of sending the rest.
func TestUploadStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := ctxReader{ctx, strings.NewReader("base disk")}
	buf := make([]byte, 4)
	if n, err := r.Read(buf); n != 4 || err != nil {
		t.Fatalf("read before the end: %d %v", n, err)
	}
	cancel()
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("read after the end: %d %v", n, err)
	}
}

// TestBootErrorReadsTheConsoleWhereQEMURuns: a remote guest that does not
// boot is explained by its console there, not by a file of this host.
func TestBootErrorReadsTheConsoleWhereQEMURuns(t *testing.T) {
	var asked string
	m := &vm{exited: make(chan struct{}), readFile: func(path string) ([]byte, error) {
		asked = path
		return []byte("[    1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n"), nil
	}}
	err := bootError(m, "/nonexistent", "/var/lib/vfleet/libvirt/vfleet-r-g/console.log", errors.New("agent not ready"))
	if asked != "/var/lib/vfleet/libvirt/vfleet-r-g/console.log" || !strings.Contains(err.Error(), "Unable to mount root fs") {
		t.Errorf("read %q: %v", asked, err)
	}
}

// TestDomainNICIsTheDirectVMsCard: the domain's card is on the tap by
// name, left as it is, virtio without a ROM, QEMU's backend under TCG,
// its transmit offloads off when the path says so.
func TestDomainNICIsTheDirectVMsCard(t *testing.T) {
	c := launchConfig{Name: "g", Machine: MachineQ35, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256, Kernel: "/k", DiskFormat: formatQCOW2,
		NIC: &nicConfig{Tap: "vfrt0123", MAC: "02:76:04:00:00:01", OffloadsOff: true}}
	doc, err := domainXML("vfleet-r-g", "r", "", c, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	if len(d.Devices.Interfaces) != 1 {
		t.Fatalf("interfaces:\n%s", doc)
	}
	n := d.Devices.Interfaces[0]
	if n.Source == nil || n.Source.Ethernet == nil || n.Target.Dev != "vfrt0123" || n.Target.Managed != "no" || n.MAC.Address != "02:76:04:00:00:01" ||
		n.Model.Type != "virtio" || n.ROM.Enabled != "no" || n.Driver.Name != "qemu" || n.Driver.Host == nil || n.Driver.Host.TSO4 != "off" || n.Driver.Host.CSum != "off" {
		t.Errorf("interface:\n%s", doc)
	}
	c.Accel, c.NIC.OffloadsOff = AccelKVM, false
	if n := domainNIC(*c.NIC, c.Accel); n.Driver.Name != "" || n.Driver.Host != nil {
		t.Errorf("under KVM with offloads: driver %+v", n.Driver)
	}
}

// fakeDomainEvents is a libvirt connection whose lifecycle events the test
// sends, and which counts the state queries.
type fakeDomainEvents struct {
	events       chan libvirt.DomainEventLifecycleMsg
	disconnected chan struct{}
	gets         atomic.Int32
}

func (f *fakeDomainEvents) LifecycleEvents(context.Context) (<-chan libvirt.DomainEventLifecycleMsg, error) {
	return f.events, nil
}

func (f *fakeDomainEvents) DomainGetState(libvirt.Domain, uint32) (int32, int32, error) {
	f.gets.Add(1)
	return int32(libvirt.DomainRunning), 0, nil
}

func (f *fakeDomainEvents) Disconnected() <-chan struct{} { return f.disconnected }

// TestWatchDomainWaitsForEvents: a domain's watch asks its state once,
// then only reads libvirt's lifecycle events, which are every domain's:
// another domain's stop, or its own start, does not end it; its own stop
// does, and so does a lost connection, with an error.
func TestWatchDomainWaitsForEvents(t *testing.T) {
	send := func(f *fakeDomainEvents, ev libvirt.DomainEventLifecycleMsg) {
		t.Helper()
		select {
		case f.events <- ev:
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch does not read lifecycle events (%d state queries)", f.gets.Load())
		}
	}
	ended := func(m *vm) bool {
		select {
		case <-m.exited:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	dom := libvirt.Domain{Name: "vfleet-r-g"}
	f := &fakeDomainEvents{events: make(chan libvirt.DomainEventLifecycleMsg), disconnected: make(chan struct{})}
	m := &vm{exited: make(chan struct{})}
	if err := m.watchDomain(f, dom); err != nil {
		t.Fatal(err)
	}
	send(f, libvirt.DomainEventLifecycleMsg{Dom: libvirt.Domain{Name: "vfleet-r-other"}, Event: int32(libvirt.DomainEventStopped)})
	send(f, libvirt.DomainEventLifecycleMsg{Dom: dom, Event: int32(libvirt.DomainEventResumed)})
	// Taken only once the one before was handled.
	send(f, libvirt.DomainEventLifecycleMsg{Dom: dom, Event: int32(libvirt.DomainEventSuspended)})
	select {
	case <-m.exited:
		t.Fatal("the watch ended on another domain's stop or its own resume")
	default:
	}
	if n := f.gets.Load(); n != 1 {
		t.Errorf("%d state queries, want 1: the one after subscribing", n)
	}
	send(f, libvirt.DomainEventLifecycleMsg{Dom: dom, Event: int32(libvirt.DomainEventStopped)})
	if !ended(m) || m.err != nil {
		t.Errorf("the domain's stop: ended %v, err %v", ended(m), m.err)
	}

	f = &fakeDomainEvents{events: make(chan libvirt.DomainEventLifecycleMsg), disconnected: make(chan struct{})}
	m = &vm{exited: make(chan struct{})}
	if err := m.watchDomain(f, dom); err != nil {
		t.Fatal(err)
	}
	close(f.disconnected)
	if !ended(m) || !errors.Is(m.err, ErrLibvirt) {
		t.Errorf("a lost connection: err %v", m.err)
	}
}

// A domain start that failed on libvirt's cgroup race is tried again;
// every other failure, a mkdir's other errors among them, is the
// guest's.
func TestCgroupRaceIsOnlyThatError(t *testing.T) {
	race := libvirt.Error{Code: uint32(libvirt.ErrSystemError), Message: "Failed to create v1 controller cpu for group: No such file or directory"}
	for err, want := range map[error]bool{
		race:                          true,
		fmt.Errorf("start: %w", race): true,
		libvirt.Error{Code: uint32(libvirt.ErrSystemError), Message: "Failed to create v1 controller cpu for group: Permission denied"}: false,
		libvirt.Error{Code: uint32(libvirt.ErrInternalError), Message: race.Message}:                                                    false,
		errors.New(race.Message): false,
		nil:                      false,
	} {
		if got := cgroupRace(err); got != want {
			t.Errorf("cgroupRace(%v) = %v, want %v", err, got, want)
		}
	}
}
