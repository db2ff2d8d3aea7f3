package qemu

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
)

func TestNewRefusesWhatLibvirtCannotDo(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	env := guest.Env{StateDir: "/var/lib/vfleet/runs/r/state"}
	for why, spec := range map[string]guest.Spec{
		"microvm": {Runtime: MachineMicroVM},
		"remote":  {Libvirt: "qemu+ssh://root@lab2/system"},
		"session": {Libvirt: "qemu:///session"},
		"clone":   {Launch: LaunchClone},
		"sandbox": {Security: guest.SecuritySandbox},
		"arm64":   {Arch: "arm64"},
		"nic":     {Tap: &guest.TapConfig{NSPath: "/run/netns/hs", Name: "r0", Addr: tapAddr, Gateway: tapAddr.Addr().Prev(), MAC: tapMAC}},
	} {
		spec.Name, spec.Libvirt = "v", cmp.Or(spec.Libvirt, LibvirtSystem)
		if _, err := k.New(spec, env); err == nil {
			t.Errorf("%s: a libvirt-managed vm accepted %+v", why, spec)
		}
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
