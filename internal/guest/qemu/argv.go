package qemu

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
)

// Machines a VM guest can run on; the scenario's runtime names one.
const (
	MachineQ35     = "q35"
	MachineMicroVM = "microvm"
	// DefaultMachine is the machine when the runtime is empty.
	DefaultMachine = MachineQ35
)

// agentPort is the virtio-serial port's name, which the guest's init reads
// from the kernel command line.
const agentPort = "vfleet.agent"

// launchConfig is everything QEMU's command line is made from.
type launchConfig struct {
	Name        string // guest name, for QEMU's process and thread names
	Arch        string // the guest's, as Debian names it
	Machine     string // MachineQ35, MachineMicroVM or MachineVirt
	Accel       string // "kvm" or "tcg"
	VCPUs       int
	MemoryMiB   int64
	Kernel      string
	Initramfs   string // empty to boot without one
	Disk        string
	DiskFormat  string // "qcow2" or "raw"
	Cmdline     string
	AgentSocket string
	QMPSocket   string
	ConsoleLog  string
	// NIC is the guest's network card, nil for none.
	NIC *nicConfig
	// RAM, when set, is a file the guest's memory lives in, which is what
	// lets a booted template be cloned (see template.go).
	RAM *ramFile
	// Incoming makes QEMU wait for a saved state to resume instead of
	// booting the kernel: a clone of a template.
	Incoming bool
	// MemoryMerge offers guest RAM to the host's KSM (QEMU marks it
	// mergeable); off, KSM leaves it alone even when the host runs it.
	MemoryMerge bool
	// Firmware, when set, boots the disk's own boot loader through UEFI
	// instead of Kernel: Kernel, Initramfs and Cmdline are then unused.
	Firmware *firmwareFiles
	// Seed is a read-only disk for the guest's cloud-init, empty for none.
	Seed string
	// TranslationMiB bounds TCG's translation cache, 0 for QEMU's default
	// (up to 1 GiB, filled as the guest runs new code). Each QEMU process
	// has its own, so a fleet keeps it small.
	TranslationMiB int
	// Sandbox turns on QEMU's own seccomp filter (sandboxFilter).
	Sandbox bool
}

// firmwareFiles are a guest's UEFI firmware: the code, shared and
// read-only, and its own copy of the variable store, which the firmware
// writes (boot entries).
type firmwareFiles struct {
	Code, Vars string
}

// ramFile is guest memory in a file. A template maps it shared, so that
// what it boots into lands in the file; a clone maps it private, so that
// it reads the template's pages and its writes stay its own
// (copy-on-write).
type ramFile struct {
	Path   string
	Shared bool
}

// nicConfig is a virtio-net card on a tap or macvtap QEMU inherits as an
// open file, or on a stream connected to passt's socket; or a PCI device
// of the host lent to the VM whole (VFIO).
type nicConfig struct {
	// FD is the device's descriptor number in QEMU: 3 plus its index in
	// exec.Cmd.ExtraFiles.
	FD  int
	MAC string
	// Stream says FD is a stream connected to passt (netpath.VMPasst),
	// not a tap.
	Stream bool
	// VhostFD, when above 0, is an open vhost-net device's descriptor:
	// the kernel moves the NIC's packets instead of QEMU.
	VhostFD int
	// OffloadsOff turns the card's transmit offloads off (offloadsOff).
	OffloadsOff bool
	// Tap, for a domain, is the tap libvirt's QEMU opens by name in this
	// host's own namespace (guest.TapConfig.Root); FD is then unused.
	Tap string
	// Unplugged puts the card on a hub port that leads nowhere instead of
	// a device: a template has the card its clones will have, but no
	// network of its own.
	Unplugged bool
	// VFIO, when set, is the PCI address of a host device bound to
	// vfio-pci (netpath.VMVFIO): the VM's NIC is that device, with the MAC
	// it brings (a whole NIC's permanent one, or the one netpath set on a
	// virtual function), and no other field applies.
	VFIO string
}

// offloadsOff are the virtio-net properties, as QEMU names them, that let
// the guest hand the host partial checksums and GSO frames: the device's
// checksum and segmentation features for what the guest sends. With them
// off the guest's own stack finishes every checksum and segment. What the
// guest receives keeps its offloads: no path that turns these off needs
// that.
var offloadsOff = []string{"csum", "gso", "host_tso4", "host_tso6", "host_ecn", "host_ufo"}

// nicOffloads is what a VM's record says of its card's offloads; why is
// the path's reason to turn them off, empty to keep QEMU's defaults; a
// card on a stream (passt's) has none to offer.
func nicOffloads(why string, stream bool) string {
	if stream {
		return "none: a stream netdev carries no virtio-net header, so the card offers the guest no checksum or segmentation offloads"
	}
	if why == "" {
		return "QEMU's defaults: the guest may send partial checksums and GSO frames"
	}
	return strings.Join(offloadsOff, "=off ") + "=off, because " + why
}

// qemuArgv is QEMU's argv (without the program) for one guest. The two
// machines differ only in how devices attach: PCI functions on q35, MMIO
// transports on microvm.
func qemuArgv(c launchConfig) []string {
	bus := "pci"
	machine := "q35"
	if c.Machine == MachineMicroVM {
		bus = "device"
		// No option ROMs (no firmware needs them) and no PCIe host; ACPI
		// stays on, for the power button and for finding the virtio-mmio
		// devices: the cloud kernel cannot take them from its command line.
		machine = "microvm,x-option-roms=off,pcie=off,acpi=on"
		if c.Accel != "kvm" {
			// Without KVM's clock the kernel calibrates its TSC against
			// the PIT, which microvm leaves out under TCG unless asked;
			// without it the boot hangs.
			machine += ",pit=on,pic=on,rtc=on"
		}
	}
	if c.Machine == MachineVirt {
		// GICv3 takes more than 8 vCPUs; under KVM, the host's own.
		machine = "virt,gic-version=3"
		if c.Accel == AccelKVM {
			machine = "virt,gic-version=host"
		}
	}
	accel := c.Accel
	if c.TranslationMiB > 0 && c.Accel == AccelTCG {
		accel += fmt.Sprintf(",tb-size=%d", c.TranslationMiB)
	}
	if c.RAM != nil {
		machine += ",memory-backend=ram"
	} else {
		machine += ",mem-merge=" + onOff(c.MemoryMerge)
	}
	cpu := archSpecs[cmp.Or(c.Arch, "amd64")].tcgCPU
	if c.Accel == "kvm" {
		cpu = "host"
	}
	a := []string{
		"-name", "vfleet-" + c.Name + ",debug-threads=on",
		"-machine", machine,
		"-accel", accel,
		"-cpu", cpu,
		"-smp", fmt.Sprint(c.VCPUs),
		"-m", fmt.Sprintf("%dM", c.MemoryMiB),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
	}
	if c.Firmware != nil {
		a = append(a, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+c.Firmware.Code,
			"-drive", "if=pflash,format=raw,unit=1,file="+c.Firmware.Vars)
	} else {
		a = append(a, "-kernel", c.Kernel)
	}
	if c.RAM != nil {
		a = append(a, "-object", fmt.Sprintf("memory-backend-file,id=ram,size=%dM,mem-path=%s,share=%s,merge=%s",
			c.MemoryMiB, c.RAM.Path, onOff(c.RAM.Shared), onOff(c.MemoryMerge)))
	}
	rootDisk := "virtio-blk-" + bus + ",drive=root"
	if c.Firmware != nil {
		// The firmware boots the root disk first, not the seed.
		rootDisk += ",bootindex=0"
	} else {
		if c.Initramfs != "" {
			a = append(a, "-initrd", c.Initramfs)
		}
		a = append(a, "-append", c.Cmdline)
	}
	a = append(a,
		"-chardev", "file,id=console,path="+c.ConsoleLog,
		"-serial", "chardev:console",
		"-drive", "file="+c.Disk+",format="+cmp.Or(c.DiskFormat, formatQCOW2)+",if=none,id=root,discard=unmap",
		"-device", rootDisk,
		"-device", "virtio-serial-"+bus+",id=serial0",
		"-chardev", "socket,id=agent,path="+c.AgentSocket+",server=on,wait=off",
		"-device", "virtserialport,bus=serial0.0,chardev=agent,name="+agentPort,
		"-chardev", "socket,id=qmp,path="+c.QMPSocket+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	if c.Seed != "" {
		a = append(a, "-drive", "file="+c.Seed+",format=raw,if=none,id=seed,readonly=on", "-device", "virtio-blk-"+bus+",drive=seed")
	}
	if c.NIC != nil && c.NIC.VFIO != "" {
		// QEMU opens the device's vfio group itself and maps all the
		// guest's memory for the device's DMA, pinned (locked) for the
		// VM's life. No option ROM: the kernel is booted directly.
		a = append(a, "-device", "vfio-pci,host="+c.NIC.VFIO+",id=net0,rombar=0")
	} else if c.NIC != nil {
		// The device was opened with IFF_VNET_HDR, so frames cross it with
		// their virtio-net header and checksum and segmentation offloads
		// reach the host's stack. QEMU reads that from the descriptor
		// itself and refuses vnet_hdr= next to fd=.
		netdev := fmt.Sprintf("tap,id=net0,fd=%d", c.NIC.FD)
		switch {
		case c.NIC.Unplugged:
			netdev = "hubport,id=net0,hubid=0"
		case c.NIC.Stream:
			// The stream netdev (QEMU 7.2 and later) takes the socket
			// vfleet connected as it takes a tap's descriptor: QEMU needs
			// no access to the run's directory, sandboxed or not. Frames
			// cross it without a virtio-net header, so the guest's card
			// offers no offloads.
			netdev = fmt.Sprintf("stream,id=net0,server=off,addr.type=fd,addr.str=%d", c.NIC.FD)
		case c.NIC.VhostFD > 0:
			netdev += fmt.Sprintf(",vhost=on,vhostfd=%d", c.NIC.VhostFD)
		}
		a = append(a, "-netdev", netdev)
		nic := "virtio-net-" + bus + ",netdev=net0,mac=" + c.NIC.MAC
		if c.NIC.OffloadsOff {
			nic += "," + strings.Join(offloadsOff, "=off,") + "=off"
		}
		if bus == "pci" {
			// No PXE option ROM: the kernel is booted directly, and the
			// ROM file is a separate package (ipxe-qemu) a host may lack.
			nic += ",romfile="
		}
		a = append(a, "-device", nic)
	}
	if c.Sandbox {
		a = append(a, "-sandbox", sandboxFilter)
	}
	if c.Incoming {
		// Deferred, so that the monitor can set the migration's
		// capabilities before the state is read (see restoreState).
		a = append(a, "-incoming", "defer")
	}
	return a
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// kernelCmdline is the guest kernel's command line. panic=-1 with QEMU's
// -no-reboot turns a guest panic into QEMU exiting, so a failed boot is
// seen at once. init= is used only when booting without an initramfs,
// whose own /init takes precedence. Everything after "--" is the init's
// argv. tscKHz, when known (under TCG), is the guest TSC's frequency, so
// the kernel need not calibrate it; see tscParams. console is the serial
// port's name in the guest.
// nic, when set, is how the guest's init configures its network card.
func kernelCmdline(console, root, hostname, init, workdir string, tscKHz int64, nic *vminit.NetConfig) string {
	p := []string{
		"console=" + console, "root=" + root, "rootfstype=ext4", "ro", "init=" + init,
		"panic=-1", "loglevel=6", // notices too: a failed boot shows why
		vminit.ParamHostname + "=" + hostname, vminit.ParamPort + "=" + agentPort,
	}
	p = append(p, tscParams(tscKHz)...)
	if nic != nil {
		p = append(p, vminit.ParamNet+"="+nic.String())
	}
	p = append(p, "--", "--pid1", "--workdir", workdir)
	return strings.Join(p, " ")
}

// tscParams tell a guest under TCG its TSC's frequency (tscKHz > 0) and
// that its TSC is reliable. An emulated TSC is the host's, steady and
// monotonic, but the kernel's clocksource watchdog checks it against
// jiffies, whose ticks arrive late whenever the emulating thread waits
// for a host CPU: on a busy host it marked the TSC unstable during a
// template's boot, and every clone of it then kept time with jiffies,
// 4 ms steps, and could not stop its tick when idle (250 timer interrupts
// a second emulated in every idle clone: 4% of a host core each, so that
// 70 idle clones took the whole machine).
func tscParams(tscKHz int64) []string {
	if tscKHz <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("tsc_early_khz=%d", tscKHz), "tsc=reliable"}
}

// DefaultUserCmdline is a user's disk's kernel command line when the
// scenario gives none: a disk that is one file system, mounted writable
// (each guest writes to its own overlay, never to the user's disk).
const DefaultUserCmdline = "root=/dev/vda rw"

// userCmdline is the kernel command line of a user's disk booted with the
// user's kernel: the user's parameters first, then vfleet's. The kernel
// runs vfleet's agent first (rdinit=), which starts its serving copy and
// hands over to the initrd's own first program: a user's rdinit= becomes
// vminit.ParamNextInit for that. The user's console= and panic= win over
// vfleet's defaults; the words after the user's "--" stay init's.
// systemd.hostname= gives the name to an image whose init is systemd,
// which otherwise sets its own from the image's /etc/hostname.
func userCmdline(user, console, hostname string, tscKHz int64, nic *vminit.NetConfig) string {
	if strings.TrimSpace(user) == "" {
		user = DefaultUserCmdline
	}
	var params, initArgs []string
	has := map[string]bool{}
	words := vminit.SplitCmdline(user)
	for i, w := range words {
		if w == "--" {
			initArgs = words[i:]
			break
		}
		key, value, _ := strings.Cut(w, "=")
		has[key] = true
		if key == vminit.ParamRDInit {
			w = vminit.ParamNextInit + "=" + value
		}
		params = append(params, quoteParam(w))
	}
	if !has["console"] {
		params = append(params, "console="+console)
	}
	if !has["panic"] {
		params = append(params, "panic=-1")
	}
	params = append(params, vminit.ParamRDInit+"="+vminit.BesideInitPath, "systemd.hostname="+hostname)
	if !has["tsc"] && !has["tsc_early_khz"] {
		params = append(params, tscParams(tscKHz)...)
	}
	params = append(params, besideParams(hostname, nic)...)
	return strings.Join(append(params, initArgs...), " ")
}

// besideParams are what vfleet's agent, started beside a user's image's
// own init, reads to set the guest up (vminit.SetUpBeside).
func besideParams(hostname string, nic *vminit.NetConfig) []string {
	p := []string{vminit.ParamHostname + "=" + hostname, vminit.ParamPort + "=" + agentPort}
	if nic != nil {
		p = append(p, vminit.ParamNet+"="+nic.String())
	}
	return p
}

// quoteParam puts back the quotes SplitCmdline took off a value with
// spaces.
func quoteParam(w string) string {
	if !strings.ContainsAny(w, " \t") {
		return w
	}
	if key, value, ok := strings.Cut(w, "="); ok {
		return key + `="` + value + `"`
	}
	return `"` + w + `"`
}

// checkUserCmdline refuses what would break vfleet's part of a user's
// command line.
func checkUserCmdline(s string) error {
	if strings.Count(s, `"`)%2 != 0 {
		return fmt.Errorf("cmdline %q has an unclosed double quote", s)
	}
	for _, w := range vminit.SplitCmdline(s) {
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, vminit.ParamPrefix) {
			return fmt.Errorf("cmdline parameter %q: names starting %q are vfleet's own", w, vminit.ParamPrefix)
		}
	}
	// x86's kernel takes 2048 bytes; vfleet's parameters need the rest.
	if len(s) > maxUserCmdline {
		return fmt.Errorf("cmdline is %d bytes: at most %d fit beside vfleet's own parameters", len(s), maxUserCmdline)
	}
	return nil
}

const maxUserCmdline = 1536
