package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/testutil"
)

// defineUserDomain defines, as a user would have, a persistent domain
// that boots the qcow2 disk as os says; the test undefines it when it
// ends. It is never started.
func defineUserDomain(t *testing.T, disk string, os libvirtxml.DomainOS) string {
	t.Helper()
	name := fmt.Sprintf("vfleet-test-userdom-%d", time.Now().UnixNano()%1e9)
	os.Type = &libvirtxml.DomainOSType{Arch: "x86_64", Machine: MachineQ35, Type: "hvm"}
	d := libvirtxml.Domain{
		Type: "qemu", Name: name,
		Memory: &libvirtxml.DomainMemory{Value: 512, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS:     &os,
		// As virt-install writes it: UEFI needs ACPI on x86.
		Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}},
		Devices: &libvirtxml.DomainDeviceList{Disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}}},
	}
	doc, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	l, err := dialLibvirt(context.Background(), LibvirtSystem, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Disconnect()
	if _, err := l.DomainDefineXML(doc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l, err := dialLibvirt(context.Background(), LibvirtSystem, "")
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Disconnect()
		dom, err := l.DomainLookupByName(name)
		if err == nil {
			err = l.DomainUndefine(dom)
		}
		if err != nil {
			t.Errorf("undefine %s: %v", name, err)
		}
	})
	return name
}

// userDomainState is what must not change of a user's domain when guests
// run from it: its definition, whether it runs, and its disk's bytes.
func userDomainState(t *testing.T, name, disk string) string {
	t.Helper()
	l, err := dialLibvirt(context.Background(), LibvirtSystem, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Disconnect()
	dom, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := l.DomainGetXMLDesc(dom, libvirt.DomainXMLInactive)
	if err != nil {
		t.Fatal(err)
	}
	state, _, err := l.DomainGetState(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("state %d\ndisk sha256 %s\n%s", state, hex.EncodeToString(h.Sum(nil)), doc)
}

// TestLibvirtRunsAUsersDomain runs a guest as a transient copy of a
// user's shut-off domain (image libvirt:DOMAIN): its kernel, initrd and
// command line, its disk under an overlay, vfleet's agent beside the
// domain's own init. The domain's definition, state and disk are the same
// afterwards, and a domain that is not there is refused before anything
// starts, naming those that are. It is also the boot through libvirt of a
// user's disk with its own kernel: a disk given in the spec takes the same
// launch configuration (TestDomainXMLIsTheDirectVMsShape).
func TestLibvirtRunsAUsersDomain(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresLibvirt(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	disk := testutil.ForeignVM(t)
	img := testutil.Image(t)
	name := defineUserDomain(t, disk.QCOW2, libvirtxml.DomainOS{Kernel: disk.Kernel, Initrd: disk.Initrd, Cmdline: "root=/dev/vda rw"})
	before := userDomainState(t, name, disk.QCOW2)
	leaks := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, leaks)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: testutil.BuildAgent(t), StateDir: root + "/state", Ledger: led}
	spec := guest.Spec{Name: "ud-a", Kind: KindName, Accel: AccelTCG, Image: guest.LibvirtImagePrefix + name, Libvirt: LibvirtSystem}
	ctx := context.Background()
	k, _ := guest.Lookup(KindName)
	if err := k.(guest.SpecProber).ProbeSpec(ctx, spec, env); err != nil {
		t.Fatalf("probe of a usable domain: %v", err)
	}
	missing := spec
	missing.Image = guest.LibvirtImagePrefix + "vfleet-test-no-such-domain"
	if err := k.(guest.SpecProber).ProbeSpec(ctx, missing, env); !errors.Is(err, ErrUnusableDomain) || !strings.Contains(err.Error(), name) {
		t.Errorf("probe of a domain that is not there: %v, want ErrUnusableDomain naming %s", err, name)
	}

	g := newVM(t, spec, env)
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Details["libvirt_source_domain"] != name || info.Details["image"] != disk.QCOW2 || info.Details["kernel"] != disk.Kernel ||
		info.Details["libvirt_domain"] != domainName(env.RunID, "ud-a") {
		t.Errorf("details = %v", info.Details)
	}
	r, err := g.Exec(ctx, agent.Request{Argv: []string{"sh", "-c", "cat /proc/1/comm; hostname; echo guest > /root/written && sync"}, TimeoutMS: 60_000})
	if err != nil || strings.Join(strings.Fields(string(r.Stdout)), " ") != "systemd ud-a" {
		t.Errorf("PID 1 and hostname in the copy: %v %+v", err, r)
	}
	startUnderAGuest(t, name)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if ran, ok := g.Info().Details[detailSourceRan]; ok {
		t.Errorf("the guest noted that the domain ran: %s", ran)
	}
	if domainExists(t, domainName(env.RunID, "ud-a")) {
		t.Error("the copy outlived its stop")
	}
	if after := userDomainState(t, name, disk.QCOW2); after != before {
		t.Errorf("the user's domain changed:\nbefore %s\nafter %s", before, after)
	}
}

// startUnderAGuest tries to start the user's domain name, paused (its
// guest would run no code), while a guest runs on an overlay of its disk:
// QEMU's image lock on the disk, which the guest's QEMU holds as its
// overlay's backing file, must refuse it.
func startUnderAGuest(t *testing.T, name string) {
	t.Helper()
	l, err := dialLibvirt(context.Background(), LibvirtSystem, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Disconnect()
	dom, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	// libvirt keeps the QEMU log of the start it tried.
	t.Cleanup(func() { os.Remove(filepath.Join(libvirtLogDir, name+".log")) })
	_, err = l.DomainCreateWithFlags(dom, uint32(libvirt.DomainStartPaused))
	if err == nil {
		if err := l.DomainDestroy(dom); err != nil {
			t.Errorf("destroy %s: %v", name, err)
		}
		t.Fatalf("the user's domain %s started while a guest ran on its disk", name)
	}
	if !strings.Contains(err.Error(), "lock") {
		t.Errorf("the user's domain's start under a guest: %v, want QEMU's image lock refusing it", err)
	}
	t.Logf("the user's domain's start under a guest: %v", err)
}

// TestLibvirtRunsAUsersUEFIDomain: a user's domain that boots through
// UEFI runs as its transient copy does, with the firmware and its own
// variable store, vfleet's agent brought by the cloud-init seed; the
// domain is unchanged afterwards.
func TestLibvirtRunsAUsersUEFIDomain(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresLibvirt(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.RequiresTool(t, "genisoimage", "genisoimage")
	disk := testutil.ForeignUEFI(t)
	img := testutil.Image(t)
	name := defineUserDomain(t, disk.QCOW2, libvirtxml.DomainOS{Loader: &libvirtxml.DomainLoader{Path: archSpecs["amd64"].uefi.code, Readonly: "yes", Type: "pflash"}})
	before := userDomainState(t, name, disk.QCOW2)
	leaks := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, leaks)
	root, led := testutil.Ledger(t)
	env := guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: testutil.BuildAgent(t), StateDir: root + "/state", Ledger: led}
	g := newVM(t, guest.Spec{Name: "ud-uefi", Kind: KindName, Accel: AccelTCG, Image: guest.LibvirtImagePrefix + name, Libvirt: LibvirtSystem}, env)
	ctx := context.Background()
	info := startVM(t, g)
	defer g.Stop(ctx)
	if info.Details["libvirt_source_domain"] != name || !strings.HasPrefix(info.Details["firmware"], "uefi") || info.Details["agent_via"] != "cloud-init NoCloud seed" {
		t.Errorf("details = %v", info.Details)
	}
	for argv, want := range map[string]string{"cat /proc/1/comm": "systemd", "hostname": "ud-uefi", "test -d /sys/firmware/efi": ""} {
		r, err := g.Exec(ctx, agent.Request{Argv: strings.Fields(argv), TimeoutMS: 30_000})
		if err != nil || r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != want {
			t.Errorf("%s in the copy: %v, exit %d, %q, want %q", argv, err, r.ExitCode, r.Stdout, want)
		}
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if after := userDomainState(t, name, disk.QCOW2); after != before {
		t.Errorf("the user's domain changed:\nbefore %s\nafter %s", before, after)
	}
}
