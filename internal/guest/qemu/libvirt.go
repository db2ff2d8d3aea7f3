package qemu

import (
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// LibvirtSystem is the URI of the host's own system libvirt; another
// host's is qemu+ssh://USER@HOST/system (parseLibvirtURI).
const LibvirtSystem = "qemu:///system"

// kindLibvirtDomain is the ledger's entry for a domain vfleet defined: its
// id is the domain's name, its data the URI it lives at.
const kindLibvirtDomain = "libvirt-domain"

func init() { ledger.RegisterUndo(kindLibvirtDomain, undoLibvirtDomain) }

var _ guest.RootTapper = kind{}

// TapsInRoot: this host's libvirt runs QEMU in this host's own namespace,
// where it opens a tap by name; vfleet cannot hand it a descriptor.
// Another host's QEMU cannot be on the run's path at all.
func (kind) TapsInRoot(spec guest.Spec) (bool, error) {
	if spec.Libvirt == "" {
		return false, nil
	}
	u, err := parseLibvirtURI(spec.Libvirt)
	switch {
	case err != nil:
		return false, err
	case u.Remote:
		return false, fmt.Errorf("libvirt %s: %w", u.URI, errRemoteNIC)
	}
	return true, nil
}

// libvirtDial bounds dialling libvirt's socket.
const libvirtDial = 5 * time.Second

// libvirtNamespace names the element of a domain's <metadata> that says
// which run made it.
const libvirtNamespace = "https://github.com/vfleet/vfleet/run"

// libvirtSocket is where the system libvirt daemon answers.
var libvirtSocket = "/run/libvirt/libvirt-sock"

// ErrLibvirt wraps what libvirt refused or could not be reached for.
var ErrLibvirt = errors.New("libvirt")

// domainName is the libvirt domain of one guest of a run: virsh lists it
// under this name while the run or the fleet is up.
func domainName(runID, guestName string) string {
	return "vfleet-" + runID + "-" + guestName
}

// checkLibvirt refuses what a libvirt-managed VM cannot do (yet), before
// anything starts.
func checkLibvirt(spec guest.Spec, env guest.Env, machine, arch string, security string) error {
	u, err := parseLibvirtURI(spec.Libvirt)
	if err != nil {
		return fmt.Errorf("libvirt: %w", err)
	}
	if u.Remote {
		if err := checkRemoteLibvirt(spec, env); err != nil {
			return fmt.Errorf("libvirt %s: %w", u.URI, err)
		}
	}
	switch {
	case machine == MachineMicroVM:
		return errors.New("runtime microvm: libvirt 9.0 cannot describe a microvm's virtio-mmio devices (\"No PCI buses available\"): use runtime q35 for a libvirt-managed VM, or remove libvirt")
	case u.Remote && emulated(arch):
		// remoteAccel reads that host's capabilities for KVM; emulation
		// is decided by this host's architecture.
		return fmt.Errorf("libvirt %s: arch %s: a guest of another arch than this host's (%s) runs on this host's libvirt only, where it is emulated: use %s, or remove arch", u.URI, arch, image.HostArch, LibvirtSystem)
	case spec.Launch == LaunchClone:
		return errors.New("libvirt: launch clone restores vfleet's own templates through QEMU's monitor, which libvirt owns: use launch boot")
	case spec.Tap != nil && !spec.Tap.Root:
		return errors.New("libvirt: libvirt's QEMU opens its tap by name in this host's own namespace, not in the run's host side: the run makes it there (guest.TapConfig.Root)")
	case security == guest.SecuritySandbox:
		return errors.New("libvirt: security sandbox is vfleet's own confinement of a QEMU it starts; libvirt's QEMU runs with a static DAC label (root) instead: remove security or libvirt")
	}
	return nil
}

// dialLibvirt connects to the libvirt that uri names: this host's, or
// another's over SSH, whose host key, when hostKey is set, must be that
// one (what the ledger recorded).
func dialLibvirt(ctx context.Context, uri, hostKey string) (*libvirtConn, error) {
	u, err := parseLibvirtURI(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLibvirt, err)
	}
	if u.Remote {
		return dialRemoteLibvirt(ctx, u, hostKey)
	}
	l := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(libvirtSocket), dialers.WithLocalTimeout(libvirtDial)))
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		return nil, fmt.Errorf("%w: connect to %s (is libvirtd or virtqemud running?): %w", ErrLibvirt, uri, err)
	}
	return &libvirtConn{Libvirt: l, uri: u}, nil
}

// libvirtLogDir is where the QEMU driver keeps each domain's QEMU log,
// which outlives a transient domain.
const libvirtLogDir = "/var/log/libvirt/qemu"

// undoLibvirtDomain destroys a transient domain, which libvirt then
// forgets (one already gone is fine), and removes the QEMU log libvirt
// kept for it on its host: every run's domains have names of their own,
// so their logs would pile up.
func undoLibvirtDomain(ctx context.Context, e ledger.Entry) error {
	c, err := dialLibvirt(ctx, e.Data["uri"], e.Data["host_key"])
	if err != nil {
		return err
	}
	defer c.Close()
	dom, err := c.DomainLookupByName(e.ID)
	switch {
	case libvirt.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("%w: look up domain %s: %w", ErrLibvirt, e.ID, err)
	default:
		if err := c.DomainDestroy(dom); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("%w: destroy domain %s: %w", ErrLibvirt, e.ID, err)
		}
	}
	return c.removeFile(ctx, filepath.Join(libvirtLogDir, e.ID+".log"))
}

// domainXML describes the guest as launchConfig does QEMU's command line:
// the same kernel, initramfs, command line, disk, console and agent
// port. QEMU runs under a static DAC label, root, as vfleet's own QEMU
// does: libvirt then neither changes the owner of vfleet's shared image
// files (the base disk, kernel and initramfs every guest reads) nor needs
// them readable by libvirt-qemu.
func domainXML(name, runID, qemu string, c launchConfig, pins []int, rtPriority int) (string, error) {
	meta, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"vfleet:run"`
		NS      string   `xml:"xmlns:vfleet,attr"`
		ID      string   `xml:"id,attr"`
		Guest   string   `xml:"guest,attr"`
	}{NS: libvirtNamespace, ID: runID, Guest: c.Name})
	if err != nil {
		return "", err
	}
	arch := cmp.Or(c.Arch, "amd64")
	cpu, features := domainCPU(arch, c.Accel, c.Firmware != nil)
	domType := "qemu"
	if c.Accel == AccelKVM {
		domType = "kvm"
	}
	port := uint(0)
	d := libvirtxml.Domain{
		Type:     domType,
		Name:     name,
		Metadata: &libvirtxml.DomainMetadata{XML: string(meta)},
		Memory:   &libvirtxml.DomainMemory{Value: uint(c.MemoryMiB), Unit: "MiB"},
		VCPU:     &libvirtxml.DomainVCPU{Value: uint(c.VCPUs)},
		OS: &libvirtxml.DomainOS{
			Type:   &libvirtxml.DomainOSType{Arch: image.QEMUArch(arch), Machine: c.Machine, Type: "hvm"},
			Kernel: c.Kernel, Initrd: c.Initramfs, Cmdline: c.Cmdline,
		},
		Features: features,
		CPU:      cpu,
		// The guest ends as the direct VM's -no-reboot does: whatever
		// stops it, QEMU goes, and a transient domain with it.
		OnPoweroff: "destroy", OnReboot: "destroy", OnCrash: "destroy",
		SecLabel: []libvirtxml.DomainSecLabel{{Type: "static", Model: "dac", Relabel: "no", Label: "+0:+0"}},
		Devices: &libvirtxml.DomainDeviceList{
			Emulator: qemu,
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: c.DiskFormat, Discard: "unmap"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: c.Disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: c.ConsoleLog}},
				Target: &libvirtxml.DomainSerialTarget{Port: &port},
			}},
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: c.AgentSocket}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: agentPort}},
			}},
			// As -nodefaults: no USB, no balloon.
			Controllers: []libvirtxml.DomainController{{Type: "usb", Model: "none"}},
			MemBalloon:  &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
	libvirtFirmware(&d, c)
	if n := c.NIC; n != nil {
		d.Devices.Interfaces = []libvirtxml.DomainInterface{domainNIC(*n, c.Accel)}
	}
	if !c.MemoryMerge {
		// QEMU's default merges; vfleet's direct VMs say mem-merge=off.
		d.MemoryBacking = &libvirtxml.DomainMemoryBacking{MemoryNosharepages: &libvirtxml.DomainMemoryNosharepages{}}
	}
	if pins != nil || rtPriority > 0 {
		d.CPUTune = &libvirtxml.DomainCPUTune{}
		for i, cpu := range pins {
			d.CPUTune.VCPUPin = append(d.CPUTune.VCPUPin, libvirtxml.DomainCPUTuneVCPUPin{VCPU: uint(i), CPUSet: strconv.Itoa(cpu)})
		}
		if rtPriority > 0 {
			d.CPUTune.VCPUSched = []libvirtxml.DomainCPUTuneVCPUSched{{VCPUs: "0-" + strconv.Itoa(c.VCPUs-1), Scheduler: "fifo", Priority: &rtPriority}}
		}
	}
	return d.Marshal()
}

// domainCPU is the domain's CPU and machine features as the direct VM's
// argv has them: under KVM the host's CPU, under TCG the arch's model
// (x86-64's "max" is libvirt's mode maximum, arm64's a named core);
// x86-64's ACPI for the power button stopping it presses; arm64's GICv3
// (the host's under KVM), and ACPI only with UEFI, which is what hands the
// tables to the kernel: libvirt refuses ACPI on aarch64 without UEFI, and
// a kernel booted directly finds its devices in the device tree, as the
// direct VM's does.
func domainCPU(arch, accel string, uefi bool) (*libvirtxml.DomainCPU, *libvirtxml.DomainFeatureList) {
	var cpu *libvirtxml.DomainCPU
	switch model := archSpecs[arch].tcgCPU; {
	case accel == AccelKVM:
		cpu = &libvirtxml.DomainCPU{Mode: "host-passthrough"}
	case model == "max":
		cpu = &libvirtxml.DomainCPU{Mode: "maximum"}
	default:
		cpu = &libvirtxml.DomainCPU{Mode: "custom", Match: "exact", Model: &libvirtxml.DomainCPUModel{Value: model, Fallback: "forbid"}}
	}
	features := &libvirtxml.DomainFeatureList{}
	if arch != "arm64" {
		features.ACPI = &libvirtxml.DomainFeature{}
		return cpu, features
	}
	features.GIC = &libvirtxml.DomainFeatureGIC{Version: "3"}
	if accel == AccelKVM {
		features.GIC.Version = "host"
	}
	if uefi {
		features.ACPI = &libvirtxml.DomainFeature{}
	}
	return cpu, features
}

// domainNIC is the guest's card on the tap libvirt's QEMU opens by name
// and leaves as it is (managed='no'): as the direct VM's, a virtio card
// without an option ROM, its transmit offloads off when the path says,
// on vhost-net under KVM (libvirt's default, when /dev/vhost-net opens)
// and QEMU's own backend under TCG.
func domainNIC(n nicConfig, accel string) libvirtxml.DomainInterface {
	nic := libvirtxml.DomainInterface{
		Source: &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
		Target: &libvirtxml.DomainInterfaceTarget{Dev: n.Tap, Managed: "no"},
		MAC:    &libvirtxml.DomainInterfaceMAC{Address: n.MAC},
		Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		ROM:    &libvirtxml.DomainROM{Enabled: "no"},
		Driver: &libvirtxml.DomainInterfaceDriver{},
	}
	if accel != AccelKVM {
		nic.Driver.Name = "qemu"
	}
	if n.OffloadsOff {
		nic.Driver.Host = &libvirtxml.DomainInterfaceDriverHost{CSum: "off", GSO: "off", TSO4: "off", TSO6: "off", ECN: "off", UFO: "off"}
	}
	return nic
}

// cgroupRace is whether a domain's start failed as libvirt's does now and
// then on a cgroup v1 host without systemd-machined while another domain
// of the same daemon starts or stops (seen with two guests of one run
// starting at once): its mkdir of the domain's cgroup finds no parent. The
// start made nothing, and the next one succeeds.
func cgroupRace(err error) bool {
	var e libvirt.Error
	return errors.As(err, &e) && e.Code == uint32(libvirt.ErrSystemError) &&
		strings.HasPrefix(e.Message, "Failed to create v1 controller ") && strings.HasSuffix(e.Message, ": No such file or directory")
}

// startDomain defines and starts the guest as a transient domain at uri.
// The domain is in the ledger before it exists; the undo pushed here
// destroys it, and the ledger's entry does again if vfleet dies first.
func (g *Guest) startDomain(ctx context.Context, c *libvirtConn, cfg launchConfig, undo *guest.Teardown) (*vm, error) {
	name := domainName(g.env.RunID, cfg.Name)
	emulator, data := g.qemu.Path, map[string]string{"uri": g.libvirt}
	if c.machine != nil {
		// That host's libvirt knows its own QEMU.
		emulator, data["host_key"] = "", c.machine.HostKey
	}
	doc, err := domainXML(name, g.env.RunID, emulator, cfg, g.pins, g.Spec().RTPriority)
	if err != nil {
		return nil, err
	}
	led := g.env.Ledger
	entry, err := led.Record(kindLibvirtDomain, name, data)
	if err != nil {
		return nil, err
	}
	undo.PushRelease(led, entry)
	dom, err := c.DomainCreateXML(doc, libvirt.DomainNone)
	if cgroupRace(err) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		dom, err = c.DomainCreateXML(doc, libvirt.DomainNone)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: start domain %s: %w", ErrLibvirt, name, err)
	}
	if g.Spec().Tap != nil {
		// QEMU holds the tap now: onto the path with it (on error the
		// domain's undo, above, destroys it).
		if err := g.wireTap(cfg.Name); err != nil {
			return nil, err
		}
	}
	m := &vm{exited: make(chan struct{}), mon: domainMonitor{l: c.Libvirt, dom: dom}}
	if c.machine != nil {
		m.dialAgent = func(ctx context.Context) (net.Conn, error) { return c.machine.DialUnix(ctx, cfg.AgentSocket) }
		m.readFile = func(path string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), qmpTimeout)
			defer cancel()
			return c.readFile(ctx, path)
		}
	}
	if err := m.watchDomain(c.Libvirt, dom); err != nil {
		return nil, err
	}
	undo.Push(func() error { m.stop(); return nil })
	pid, err := domainPID(ctx, c, name)
	if err != nil {
		return nil, err
	}
	m.pid = pid
	return m, nil
}

// wireTap puts the guest's tap, which its QEMU holds, onto its path.
func (g *Guest) wireTap(name string) error {
	if g.env.WireTap == nil {
		return errors.New("the guest's tap is in this host's namespace, and nothing puts it on its path (no Env.WireTap)")
	}
	return g.env.WireTap(name)
}

// domainEvents is what watching a domain takes of its libvirt connection.
type domainEvents interface {
	LifecycleEvents(ctx context.Context) (<-chan libvirt.DomainEventLifecycleMsg, error)
	DomainGetState(dom libvirt.Domain, flags uint32) (int32, int32, error)
	Disconnected() <-chan struct{}
}

// watchDomain closes m.exited once the domain stops (a transient domain
// that stops is forgotten) or libvirt no longer answers for it. It is told
// by libvirt's lifecycle events, which cost nothing while the domain runs,
// where asking its state every so often would cost vfleet CPU time for each
// guest all run long. It subscribes before it returns, and asks the state
// once after that, in case the domain ended before.
func (m *vm) watchDomain(l domainEvents, dom libvirt.Domain) error {
	ctx, cancel := context.WithCancel(context.Background())
	events, err := l.LifecycleEvents(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("%w: lifecycle events of domain %s: %w", ErrLibvirt, dom.Name, err)
	}
	go func() {
		defer close(m.exited)
		defer func() {
			cancel()
			// go-libvirt's sender blocks on an event nobody takes, so the
			// channel is read until it closes it.
			go func() {
				for range events {
				}
			}()
		}()
		if m.domainEnded(l, dom) {
			return
		}
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					m.err = fmt.Errorf("%w: lifecycle events of domain %s ended", ErrLibvirt, dom.Name)
					return
				}
				// The subscription is the connection's, for every domain
				// (go-libvirt does not pass libvirt a domain to filter on).
				switch libvirt.DomainEventType(ev.Event) {
				case libvirt.DomainEventStopped, libvirt.DomainEventCrashed, libvirt.DomainEventUndefined:
					if ev.Dom.Name == dom.Name {
						return
					}
				}
			case <-l.Disconnected():
				m.err = fmt.Errorf("%w: connection lost while domain %s ran", ErrLibvirt, dom.Name)
				return
			}
		}
	}()
	return nil
}

// domainEnded says whether the domain has stopped or is gone, noting in
// m.err why libvirt could not tell.
func (m *vm) domainEnded(l domainEvents, dom libvirt.Domain) bool {
	state, _, err := l.DomainGetState(dom, 0)
	if err != nil {
		if !libvirt.IsNotFound(err) {
			m.err = err
		}
		return true
	}
	return libvirt.DomainState(state) == libvirt.DomainShutoff || libvirt.DomainState(state) == libvirt.DomainCrashed
}

// libvirtRunDir is where the local QEMU driver keeps each running
// domain's pid file.
const libvirtRunDir = "/run/libvirt/qemu"

// domainPID is the QEMU process of a running domain, on libvirt's host.
func domainPID(ctx context.Context, c *libvirtConn, name string) (int, error) {
	b, err := c.readFile(ctx, filepath.Join(libvirtRunDir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("%w: qemu of domain %s: %w", ErrLibvirt, name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%w: qemu of domain %s: pid file: %w", ErrLibvirt, name, err)
	}
	return pid, nil
}

// domainConfinement is what libvirt confined a domain's QEMU with, read
// from the process itself: its -sandbox option ("off" without one), set
// by libvirt's seccomp_sandbox, and the user it runs as.
func domainConfinement(ctx context.Context, c *libvirtConn, pid int) (sandbox, user string, err error) {
	cmdline, err := c.readFile(ctx, filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return "", "", err
	}
	sandbox = "off"
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args[:max(len(args)-1, 0)] {
		if a == "-sandbox" {
			sandbox = args[i+1]
		}
	}
	status, err := c.readFile(ctx, filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if ids, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(ids); len(f) > 1 {
				return sandbox, f[1], nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: qemu pid %d: no Uid in its status", ErrLibvirt, pid)
}

// domainMonitor is QEMU's monitor through libvirt, which owns it.
type domainMonitor struct {
	l   *libvirt.Libvirt
	dom libvirt.Domain
}

var _ monitor = domainMonitor{}

func (d domainMonitor) VCPUThreads(context.Context) ([]int, error) {
	out, err := d.l.QEMUDomainMonitorCommand(d.dom, `{"execute":"query-cpus-fast"}`, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: query-cpus-fast: %w", ErrLibvirt, err)
	}
	var reply struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal([]byte(out), &reply); err != nil {
		return nil, fmt.Errorf("%w: query-cpus-fast: %w", ErrLibvirt, err)
	}
	return parseCPUsFast(reply.Return)
}

func (d domainMonitor) Powerdown(context.Context) error { return d.l.DomainShutdown(d.dom) }

func (d domainMonitor) Quit(context.Context) error {
	if err := d.l.DomainDestroy(d.dom); err != nil && !libvirt.IsNotFound(err) {
		return err
	}
	return nil
}

// Close leaves the connection to the guest's undo, which closes it after
// the domain is gone.
func (domainMonitor) Close() error { return nil }

// libvirtCheck: whether this host's libvirt answers for libvirt-managed
// VMs, and that it runs no network of its own (vfleet starts none, and
// Debian's default one is a NAT bridge with a DHCP server).
func libvirtCheck() doctor.Check {
	return doctor.Check{Name: "libvirt", Run: func(ctx context.Context) doctor.Result {
		l, err := dialLibvirt(ctx, LibvirtSystem, "")
		if err != nil {
			return libvirtVerdict(0, nil, err)
		}
		defer l.Close()
		version, err := l.ConnectGetLibVersion()
		if err != nil {
			return libvirtVerdict(0, nil, err)
		}
		nets, _, err := l.ConnectListAllNetworks(1, libvirt.ConnectListNetworksActive)
		if err != nil {
			return libvirtVerdict(0, nil, err)
		}
		var active []string
		for _, n := range nets {
			active = append(active, n.Name)
		}
		return libvirtVerdict(version, active, nil)
	}}
}

// libvirtVerdict judges what libvirtCheck found: libvirt's version
// (major*1000000 + minor*1000 + release) and its active networks.
func libvirtVerdict(version uint64, activeNets []string, err error) doctor.Result {
	r := doctor.Result{Name: "libvirt"}
	switch {
	case err != nil:
		r.Status = doctor.Warn
		r.Detail = fmt.Sprintf("%s does not answer (%v): VM groups with libvirt cannot start", LibvirtSystem, err)
		r.Fix = tools.DebianInstall("libvirt-daemon-system") + " and start it: virtlogd -d && libvirtd -d, or systemctl start libvirtd"
	case len(activeNets) > 0:
		r.Status = doctor.Warn
		r.Detail = fmt.Sprintf("libvirt %s runs network %s: vfleet starts no libvirt network and puts its VMs on its own paths", libvirtVersion(version), strings.Join(activeNets, ", "))
		r.Fix = "for each: virsh net-destroy NAME && virsh net-autostart --disable NAME"
	default:
		r.Status = doctor.OK
		r.Detail = fmt.Sprintf("libvirt %s answers at %s and runs no network", libvirtVersion(version), LibvirtSystem)
	}
	return r
}

func libvirtVersion(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}
