package qemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/tools"
)

// ErrUnusableDomain wraps why a user's libvirt domain (image:
// libvirt:DOMAIN) cannot be run as guests.
var ErrUnusableDomain = errors.New("libvirt domain")

// userDomain is what a guest of image libvirt:DOMAIN takes from the
// user's domain: its boot disk, which each guest runs on an overlay of,
// and how the domain boots it. The rest of the guest (vCPUs, memory,
// network) is the group's, as for any VM.
type userDomain struct {
	name     string
	disk     string // the boot disk's file
	format   string // the format the domain opens it as
	boot     guest.KernelBoot
	firmware string // guest.FirmwareUEFI, or empty for a kernel boot
	arch     string // as Debian names it
	// others are the domain's other disks, which the guests do not get.
	others []string
}

// spec is the group's spec with the domain's disk and boot in place of
// the domain's name: a user's disk, which the rest of the kind knows.
func (u userDomain) spec(spec guest.Spec) guest.Spec {
	spec.Image, spec.Boot, spec.Firmware, spec.Arch = u.disk, u.boot, u.firmware, u.arch
	return spec
}

// details is what the guest's record says of the domain it copies.
func (u userDomain) details() map[string]string {
	d := map[string]string{"libvirt_source_domain": u.name}
	if len(u.others) > 0 {
		d["libvirt_source_disks_left_out"] = strings.Join(u.others, ",")
	}
	return d
}

// domainSpec looks up the domain spec's image names at its libvirt and
// returns the spec of a user's disk it comes to, refused here, before
// anything starts, if the kind cannot run it. The domain is only read:
// it must be shut off, so that its disk does not change under the
// guests' overlays, and it stays so.
func domainSpec(ctx context.Context, spec guest.Spec) (guest.Spec, userDomain, error) {
	name, _ := spec.LibvirtDomain()
	if u, err := parseLibvirtURI(spec.Libvirt); err == nil && u.Remote {
		// Its guests would overlay the domain's disk on this host, where
		// the disk is not.
		return spec, userDomain{}, fmt.Errorf("%w %s at %s: a domain of another host is not run yet (its disk is there, and a user's disk is not uploaded to a remote host): use it at %s on its own host", ErrUnusableDomain, name, spec.Libvirt, LibvirtSystem)
	}
	doc, err := inactiveDomainXML(ctx, spec.Libvirt, name)
	if err != nil {
		return spec, userDomain{}, err
	}
	u, err := parseUserDomain(name, doc, image.HostArch)
	if err != nil {
		return spec, userDomain{}, err
	}
	bad := func(err error) (guest.Spec, userDomain, error) {
		return spec, userDomain{}, fmt.Errorf("%w %s at %s: %w", ErrUnusableDomain, name, spec.Libvirt, err)
	}
	if spec.Arch != "" && spec.Arch != u.arch {
		return bad(fmt.Errorf("the group says arch %s, the domain is %s: remove arch", spec.Arch, u.arch))
	}
	qemuImg, err := tools.Find("qemu-img")
	if err != nil {
		return spec, userDomain{}, fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	disk, err := image.InspectDisk(ctx, qemuImg.Path, u.disk)
	if err != nil {
		return bad(err)
	}
	// QEMU would read the file as the domain says; a guest's overlay is
	// backed by it as qemu-img found it, which must be the same.
	if disk.Format != u.format {
		return bad(fmt.Errorf("the domain opens disk %s as %s, but it holds %s", u.disk, u.format, disk.Format))
	}
	resolved := u.spec(spec)
	if _, err := (kind{}).New(resolved, guest.Env{}); err != nil {
		return bad(err)
	}
	return resolved, u, nil
}

// inactiveDomainXML is the persistent definition of the domain name at
// uri, as `virsh dumpxml --inactive` shows it, once it is known to be
// shut off.
func inactiveDomainXML(ctx context.Context, uri, name string) (string, error) {
	l, err := dialLibvirt(ctx, uri, "")
	if err != nil {
		return "", err
	}
	defer l.Disconnect()
	dom, state, err := lookupUserDomain(l, name)
	if err != nil {
		return "", err
	}
	if state != libvirt.DomainShutoff {
		return "", fmt.Errorf("%w %s at %s is %s: guests run on overlays of its disk, which must not change under them: shut the domain down first", ErrUnusableDomain, name, uri, domainStateName(state))
	}
	doc, err := l.DomainGetXMLDesc(dom, libvirt.DomainXMLInactive)
	if err != nil {
		return "", fmt.Errorf("%w: XML of domain %s: %w", ErrLibvirt, name, err)
	}
	return doc, nil
}

// lookupUserDomain looks the user's domain name up at l, and says its state.
func lookupUserDomain(l *libvirtConn, name string) (libvirt.Domain, libvirt.DomainState, error) {
	dom, err := l.DomainLookupByName(name)
	if libvirt.IsNotFound(err) {
		return dom, 0, fmt.Errorf("%w %s: no such domain at %s (%s)", ErrUnusableDomain, name, l.uri.URI, definedDomains(l.Libvirt))
	}
	if err != nil {
		return dom, 0, fmt.Errorf("%w: look up domain %s: %w", ErrLibvirt, name, err)
	}
	state, _, err := l.DomainGetState(dom, 0)
	if err != nil {
		return dom, 0, fmt.Errorf("%w: state of domain %s: %w", ErrLibvirt, name, err)
	}
	return dom, libvirt.DomainState(state), nil
}

// detailSourceRan is the guest's record's note that the user's domain it
// copies ran while the guest used its disk.
const detailSourceRan = "libvirt_source_domain_ran"

// sourceWatch is what a guest of a user's domain knew of the domain when
// it started (shut off, its disk last written then), to tell when it
// stops whether the user started the domain meanwhile: the disk under the
// guest's overlay may then have changed, and so what the guest measured.
type sourceWatch struct {
	domain, disk string
	written      time.Time
	// state is the domain's state now.
	state func(context.Context) (libvirt.DomainState, error)
}

// watchSource notes the user's domain's disk as it is when the guest
// starts from it.
func watchSource(uri string, u userDomain) (sourceWatch, error) {
	fi, err := os.Stat(u.disk)
	if err != nil {
		return sourceWatch{}, fmt.Errorf("%w %s: its disk: %w", ErrUnusableDomain, u.name, err)
	}
	return sourceWatch{domain: u.name, disk: u.disk, written: fi.ModTime(), state: func(ctx context.Context) (libvirt.DomainState, error) {
		l, err := dialLibvirt(ctx, uri, "")
		if err != nil {
			return 0, err
		}
		defer l.Disconnect()
		_, state, err := lookupUserDomain(l, u.name)
		return state, err
	}}, nil
}

// ranMeanwhile says how the domain was seen to have run since the guest
// started: it is not shut off now, or its disk was written; "" when
// neither. A domain that cannot be checked is said so, as the guest's
// figures are then not known to be its disk's.
func (s sourceWatch) ranMeanwhile(ctx context.Context) string {
	var seen []string
	state, err := s.state(ctx)
	switch {
	case err != nil:
		seen = append(seen, fmt.Sprintf("its state could not be read at the guest's stop (%v)", err))
	case state != libvirt.DomainShutoff:
		seen = append(seen, "it was "+domainStateName(state)+" at the guest's stop")
	}
	fi, err := os.Stat(s.disk)
	switch {
	case err != nil:
		seen = append(seen, fmt.Sprintf("its disk %s could not be read at the guest's stop (%v)", s.disk, err))
	case !fi.ModTime().Equal(s.written):
		seen = append(seen, fmt.Sprintf("its disk %s was written at %s, after the guest started", s.disk, fi.ModTime().UTC().Format(time.RFC3339)))
	}
	return strings.Join(seen, "; ")
}

// definedDomains names the persistent domains l knows, for a name that
// is not one of them.
func definedDomains(l *libvirt.Libvirt) string {
	doms, _, err := l.ConnectListAllDomains(1, libvirt.ConnectListDomainsPersistent)
	if err != nil {
		return fmt.Sprintf("its domains cannot be listed: %v", err)
	}
	var names []string
	for _, d := range doms {
		names = append(names, d.Name)
	}
	if len(names) == 0 {
		return "it defines none"
	}
	slices.Sort(names)
	return "defined: " + strings.Join(names, ", ")
}

func domainStateName(s libvirt.DomainState) string {
	switch s {
	case libvirt.DomainRunning:
		return "running"
	case libvirt.DomainBlocked:
		return "running (blocked)"
	case libvirt.DomainPaused:
		return "paused"
	case libvirt.DomainShutdown:
		return "shutting down"
	case libvirt.DomainCrashed:
		return "crashed"
	case libvirt.DomainPmsuspended:
		return "suspended"
	}
	return fmt.Sprintf("in state %d", s)
}

// parseUserDomain reads what guests take from the domain's XML, and
// refuses a domain vfleet's agent cannot get into, or whose disk a
// guest cannot run on an overlay of, saying why.
func parseUserDomain(name, doc, hostArch string) (userDomain, error) {
	bad := func(format string, args ...any) (userDomain, error) {
		return userDomain{}, fmt.Errorf("%w %s: "+format, append([]any{ErrUnusableDomain, name}, args...)...)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		return bad("its XML: %v", err)
	}
	u := userDomain{name: name, arch: hostArch}
	if d.OS != nil && d.OS.Type != nil && d.OS.Type.Arch != "" {
		u.arch = ""
		for _, a := range guest.Arches {
			if image.QEMUArch(a) == d.OS.Type.Arch {
				u.arch = a
			}
		}
		switch {
		case u.arch == "":
			return bad("its arch %s is none vfleet runs (%s)", d.OS.Type.Arch, strings.Join(guest.Arches, ", "))
		case u.arch != hostArch:
			return bad("it is %s: on this %s host it could only be emulated, which is for vfleet's own image (arch: %s, without image): run a user's domain on a host of its own arch", u.arch, hostArch, u.arch)
		}
	}
	switch {
	case d.OS != nil && d.OS.Kernel != "":
		u.boot = guest.KernelBoot{Kernel: d.OS.Kernel, Initrd: d.OS.Initrd, Cmdline: d.OS.Cmdline}
	case d.OS != nil && (d.OS.Firmware == "efi" || d.OS.Loader != nil && d.OS.Loader.Type == "pflash"):
		u.firmware = guest.FirmwareUEFI
	default:
		return bad("it boots through BIOS firmware, which vfleet's agent cannot get in by: a domain must boot a kernel directly (<os><kernel>), which the agent's initramfs joins, or through UEFI (<os firmware='efi'>), which a cloud-init seed brings it to")
	}
	var disks []libvirtxml.DomainDisk
	if d.Devices != nil {
		for _, disk := range d.Devices.Disks {
			if disk.Device == "" || disk.Device == "disk" {
				disks = append(disks, disk)
			}
		}
	}
	if len(disks) == 0 {
		return bad("it has no disk for the guests to run on")
	}
	boot := bootDisk(disks)
	for i, disk := range disks {
		if i != boot {
			u.others = append(u.others, diskName(disk))
		}
	}
	disk := disks[boot]
	if disk.Source == nil || disk.Source.File == nil || disk.Source.File.File == "" {
		return bad("its boot disk %s is %s, not a file: guests run on a qcow2 overlay of a file", diskName(disk), diskSourceKind(disk.Source))
	}
	u.disk = disk.Source.File.File
	if disk.Driver != nil {
		u.format = disk.Driver.Type
	}
	if !slices.Contains(image.DiskFormats, u.format) {
		return bad("its boot disk %s has format %q: guests' overlays are backed by %s only", u.disk, u.format, strings.Join(image.DiskFormats, " or "))
	}
	if param, dev := sdNameInCmdline(disk, u.boot.Cmdline); param != "" {
		return bad("its cmdline's %s=%s names a disk as bus %s does (its boot disk is %s), but each guest gets that disk as virtio's vda, and its kernel would wait for %s for ever: give the domain's cmdline %s=UUID=... or %s=LABEL=..., or put its disk on bus virtio",
			param, dev, cmp.Or(diskBus(disk), "not virtio"), diskName(disk), dev, param, param)
	}
	return u, nil
}

// sdNameInCmdline is the first parameter of the kernel's command line, and
// the device it names, that names a SCSI, SATA, USB or IDE disk (/dev/sd*,
// /dev/hd*) when the boot disk is not virtio: each guest gets the disk as
// virtio's vda, so that name is gone. Empty when there is none, or the
// disk is virtio already.
func sdNameInCmdline(disk libvirtxml.DomainDisk, cmdline string) (param, dev string) {
	if diskBus(disk) == "virtio" {
		return "", ""
	}
	for _, w := range vminit.SplitCmdline(cmdline) {
		if w == "--" {
			break
		}
		k, v, ok := strings.Cut(w, "=")
		if ok && (strings.HasPrefix(v, "/dev/sd") || strings.HasPrefix(v, "/dev/hd")) {
			return k, v
		}
	}
	return "", ""
}

// diskBus is the bus of a domain's disk: its target's, or without one,
// what libvirt takes from the target's name (vdX virtio, sdX scsi, hdX
// ide).
func diskBus(d libvirtxml.DomainDisk) string {
	if d.Target == nil {
		return ""
	}
	if d.Target.Bus != "" {
		return d.Target.Bus
	}
	switch {
	case strings.HasPrefix(d.Target.Dev, "vd"):
		return "virtio"
	case strings.HasPrefix(d.Target.Dev, "sd"):
		return "scsi"
	case strings.HasPrefix(d.Target.Dev, "hd"):
		return "ide"
	}
	return ""
}

// bootDisk is the index of the disk the domain boots: the one with the
// lowest boot order, or without any, the first.
func bootDisk(disks []libvirtxml.DomainDisk) int {
	best := 0
	for i, d := range disks {
		if d.Boot != nil && d.Boot.Order > 0 && (disks[best].Boot == nil || d.Boot.Order < disks[best].Boot.Order) {
			best = i
		}
	}
	return best
}

// diskName is how the domain's XML tells a disk: its target device.
func diskName(d libvirtxml.DomainDisk) string {
	if d.Target != nil && d.Target.Dev != "" {
		return d.Target.Dev
	}
	return "(no target)"
}

func diskSourceKind(s *libvirtxml.DomainDiskSource) string {
	switch {
	case s == nil || s.File != nil:
		return "without a source"
	case s.Block != nil:
		return "a block device"
	case s.Volume != nil:
		return "a storage pool's volume"
	case s.Network != nil:
		return "a network disk"
	}
	return "not file-backed"
}
