package qemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/guest"
)

// userDomainXML is a user's domain as `virsh dumpxml --inactive` shows
// it, with os and devices as each case has them.
func userDomainXML(arch, os, devices string) string {
	return `<domain type="kvm"><name>web</name><memory unit="KiB">1048576</memory>
<os><type arch="` + arch + `" machine="pc-q35-7.2">hvm</type>` + os + `</os>
<devices>` + devices + `</devices></domain>`
}

const (
	kernelOS  = `<kernel>/srv/web/vmlinuz</kernel><initrd>/srv/web/initrd.img</initrd><cmdline>root=/dev/vda1 ro</cmdline>`
	qcow2Disk = `<disk type="file" device="disk"><driver name="qemu" type="qcow2"/><source file="/srv/web/root.qcow2"/><target dev="vda" bus="virtio"/></disk>`
)

func TestParseUserDomain(t *testing.T) {
	u, err := parseUserDomain("web", userDomainXML("x86_64", kernelOS,
		`<disk type="file" device="cdrom"><driver name="qemu" type="raw"/><source file="/srv/iso/install.iso"/><target dev="sda" bus="sata"/></disk>`+
			`<disk type="file" device="disk"><driver name="qemu" type="raw"/><source file="/srv/web/data.img"/><target dev="vdb" bus="virtio"/><boot order="2"/></disk>`+
			`<disk type="file" device="disk"><driver name="qemu" type="qcow2"/><source file="/srv/web/root.qcow2"/><target dev="vda" bus="virtio"/><boot order="1"/></disk>`), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	want := guest.KernelBoot{Kernel: "/srv/web/vmlinuz", Initrd: "/srv/web/initrd.img", Cmdline: "root=/dev/vda1 ro"}
	if u.disk != "/srv/web/root.qcow2" || u.format != "qcow2" || u.boot != want || u.firmware != "" || u.arch != "amd64" ||
		strings.Join(u.others, ",") != "vdb" {
		t.Errorf("the boot disk (boot order 1), its kernel boot, the other disk left out, no CD-ROM: got %+v", u)
	}
	spec := u.spec(guest.Spec{Name: "g", Image: "libvirt:web", Libvirt: LibvirtSystem, VCPUs: 2})
	if spec.Image != u.disk || spec.Boot != want || spec.VCPUs != 2 || spec.Libvirt != LibvirtSystem {
		t.Errorf("the spec of the domain's disk: %+v", spec)
	}

	u, err = parseUserDomain("web", userDomainXML("x86_64", `<loader readonly="yes" type="pflash">/usr/share/OVMF/OVMF_CODE_4M.fd</loader>`, qcow2Disk), "amd64")
	if err != nil || u.firmware != guest.FirmwareUEFI || !u.boot.IsZero() {
		t.Errorf("a UEFI domain: %+v %v", u, err)
	}
	if u, err = parseUserDomain("web", strings.Replace(userDomainXML("x86_64", "", qcow2Disk), "<os>", `<os firmware="efi">`, 1), "amd64"); err != nil || u.firmware != guest.FirmwareUEFI {
		t.Errorf("a domain with firmware efi: %+v %v", u, err)
	}
}

func TestParseUserDomainRefuses(t *testing.T) {
	for why, c := range map[string]struct{ arch, os, devices, reason string }{
		"bios":     {"x86_64", `<boot dev="hd"/>`, qcow2Disk, "BIOS"},
		"no disk":  {"x86_64", kernelOS, `<disk type="file" device="cdrom"><source file="/srv/x.iso"/><target dev="sda"/></disk>`, "no disk"},
		"block":    {"x86_64", kernelOS, `<disk type="block" device="disk"><driver name="qemu" type="raw"/><source dev="/dev/sdb"/><target dev="vda"/></disk>`, "a block device"},
		"volume":   {"x86_64", kernelOS, `<disk type="volume" device="disk"><driver name="qemu" type="qcow2"/><source pool="default" volume="web.qcow2"/><target dev="vda"/></disk>`, "volume"},
		"vmdk":     {"x86_64", kernelOS, `<disk type="file" device="disk"><driver name="qemu" type="vmdk"/><source file="/srv/web.vmdk"/><target dev="vda"/></disk>`, `"vmdk"`},
		"arm64":    {"aarch64", kernelOS, qcow2Disk, "vfleet's own image (arch: arm64, without image)"},
		"riscv":    {"riscv64", kernelOS, qcow2Disk, "riscv64"},
		"no XML":   {"x86_64", "<os>", qcow2Disk, "XML"},
		"no local": {"x86_64", kernelOS, `<disk type="network" device="disk"><driver name="qemu" type="raw"/><source protocol="nbd" name="web"><host name="nbd.lab"/></source><target dev="vda"/></disk>`, "network"},
	} {
		_, err := parseUserDomain("web", userDomainXML(c.arch, c.os, c.devices), "amd64")
		if !errors.Is(err, ErrUnusableDomain) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want ErrUnusableDomain saying %q", why, err, c.reason)
		}
	}
}

// TestParseUserDomainRefusesAnSdRoot: a domain whose disk is on a SCSI,
// SATA or IDE bus and whose kernel is told root=/dev/sdX would boot each
// guest with that disk as virtio's vda and wait for sdX for ever; a
// virtio disk, or a root named by UUID, boots.
func TestParseUserDomainRefusesAnSdRoot(t *testing.T) {
	disk := func(dev, bus string) string {
		return `<disk type="file" device="disk"><driver name="qemu" type="qcow2"/><source file="/srv/web/root.qcow2"/><target dev="` + dev + `"` + bus + `/></disk>`
	}
	kernel := func(cmdline string) string {
		return `<kernel>/srv/web/vmlinuz</kernel><cmdline>` + cmdline + `</cmdline>`
	}
	for why, c := range map[string]struct{ os, devices, want string }{
		"sata":           {kernel("root=/dev/sda1 ro"), disk("sda", ` bus="sata"`), "root=/dev/sda1 names a disk as bus sata does"},
		"scsi by name":   {kernel("console=ttyS0 root=/dev/sdb"), disk("sdb", ""), "root=/dev/sdb names a disk as bus scsi does"},
		"ide":            {kernel("root=/dev/hda2"), disk("hda", ` bus="ide"`), "root=UUID=... or root=LABEL=..."},
		"resume on sata": {kernel("root=UUID=1234 resume=/dev/sda2"), disk("sda", ` bus="sata"`), "resume=/dev/sda2"},
	} {
		_, err := parseUserDomain("web", userDomainXML("x86_64", c.os, c.devices), "amd64")
		if !errors.Is(err, ErrUnusableDomain) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bus virtio") {
			t.Errorf("%s: %v, want ErrUnusableDomain saying %q", why, err, c.want)
		}
	}
	for why, c := range map[string]struct{ os, devices string }{
		"uuid on sata":     {kernel("root=UUID=1234 ro"), disk("sda", ` bus="sata"`)},
		"label on scsi":    {kernel("root=LABEL=web"), disk("sda", ` bus="scsi"`)},
		"virtio":           {kernel("root=/dev/vda1"), disk("vda", ` bus="virtio"`)},
		"init's own words": {kernel("root=UUID=1 -- /dev/sda"), disk("sda", ` bus="sata"`)},
	} {
		if _, err := parseUserDomain("web", userDomainXML("x86_64", c.os, c.devices), "amd64"); err != nil {
			t.Errorf("%s: %v", why, err)
		}
	}
}

func TestNewTakesAUsersDomainOnlyAtLibvirt(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	if _, err := k.New(guest.Spec{Name: "v", Image: "libvirt:web", Libvirt: LibvirtSystem}, guest.Env{}); err != nil {
		t.Errorf("a domain at the group's libvirt: %v", err)
	}
	for why, spec := range map[string]guest.Spec{
		"no libvirt": {Image: "libvirt:web"},
		"kernel":     {Image: "libvirt:web", Libvirt: LibvirtSystem, Boot: guest.KernelBoot{Kernel: "/srv/vmlinuz"}},
		"firmware":   {Image: "libvirt:web", Libvirt: LibvirtSystem, Firmware: guest.FirmwareUEFI},
		"clone":      {Image: "libvirt:web", Libvirt: LibvirtSystem, Launch: LaunchClone},
	} {
		spec.Name = "v"
		if _, err := k.New(spec, guest.Env{}); err == nil {
			t.Errorf("%s: accepted %+v", why, spec)
		}
	}
}

// TestDomainXMLBootsThroughUEFI: a disk booted through UEFI gets, as the
// direct VM's argv, the firmware read-only and the guest's own variable
// store as pflash, its root disk first, and the seed read-only beside it.
func TestDomainXMLBootsThroughUEFI(t *testing.T) {
	c := launchConfig{
		Name: "u", Machine: MachineQ35, Accel: AccelTCG, VCPUs: 1, MemoryMiB: 512,
		Firmware: &firmwareFiles{Code: "/usr/share/OVMF/OVMF_CODE_4M.fd", Vars: "/st/u/efivars.fd"}, Seed: "/st/u/seed.iso",
		Disk: "/st/u/disk.qcow2", DiskFormat: formatQCOW2, AgentSocket: "/st/u/agent.sock", ConsoleLog: "/st/u/console.log",
	}
	doc, err := domainXML("vfleet-r1-u", "r1", "/usr/bin/qemu-system-x86_64", c, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if l := d.OS.Loader; l == nil || l.Path != c.Firmware.Code || l.Readonly != "yes" || l.Type != "pflash" || d.OS.NVRam == nil || d.OS.NVRam.NVRam != c.Firmware.Vars || d.OS.Kernel != "" {
		t.Errorf("firmware:\n%s", doc)
	}
	disks := d.Devices.Disks
	if len(disks) != 2 || disks[0].Source.File.File != c.Disk || disks[0].Boot == nil || disks[0].Boot.Order != 1 ||
		disks[1].Source.File.File != c.Seed || disks[1].ReadOnly == nil || disks[1].Boot != nil {
		t.Errorf("disks:\n%s", doc)
	}
}

// TestAGuestNotesAUsersDomainThatRan: a user's domain that runs when a
// guest copying it stops, or whose disk was written since the guest
// started, is noted in the guest's record and said as a warning; one that
// stayed shut off and unwritten is not.
func TestAGuestNotesAUsersDomainThatRan(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "root.qcow2")
	if err := os.WriteFile(disk, []byte("disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	state, stateErr := libvirt.DomainShutoff, error(nil)
	w := sourceWatch{domain: "web", disk: disk, written: fi.ModTime(), state: func(context.Context) (libvirt.DomainState, error) { return state, stateErr }}
	ctx := context.Background()
	if ran := w.ranMeanwhile(ctx); ran != "" {
		t.Errorf("a domain that stayed shut off: %q", ran)
	}
	state = libvirt.DomainRunning
	if ran := w.ranMeanwhile(ctx); !strings.Contains(ran, "running at the guest's stop") {
		t.Errorf("a running domain: %q", ran)
	}
	state = libvirt.DomainShutoff
	later := fi.ModTime().Add(time.Minute)
	if err := os.Chtimes(disk, later, later); err != nil {
		t.Fatal(err)
	}
	if ran := w.ranMeanwhile(ctx); !strings.Contains(ran, "was written at") {
		t.Errorf("a domain that ran and stopped, its disk written: %q", ran)
	}
	w.written, stateErr = later, errors.New("connection refused")
	if ran := w.ranMeanwhile(ctx); !strings.Contains(ran, "could not be read") {
		t.Errorf("a libvirt that does not answer: %q", ran)
	}

	var said []string
	g := &Guest{Base: guest.NewBase(guest.Spec{Name: "g"}), env: guest.Env{Progress: func(line string) { said = append(said, line) }}}
	w.written, stateErr = fi.ModTime(), nil
	g.checkSource(w)
	if ran := g.Info().Details[detailSourceRan]; !strings.Contains(ran, "was written at") {
		t.Errorf("the guest's record: %v", g.Info().Details)
	}
	if len(said) != 1 || !strings.HasPrefix(said[0], "warning: guest g: libvirt domain web may have run") {
		t.Errorf("said %q", said)
	}
}
