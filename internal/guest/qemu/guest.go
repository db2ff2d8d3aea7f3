package qemu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/tools"
)

// Bounds on a VM's life. Emulation boots a kernel tens of times slower
// than KVM, so the agent's wait depends on the accelerator.
const (
	readyTimeoutTCG = 60 * time.Second
	readyTimeoutKVM = 15 * time.Second
	// A user's disk boots its own init (a whole systemd, say) before the
	// agent's port and NIC drivers are loaded.
	userReadyTimeoutTCG = 5 * time.Minute
	userReadyTimeoutKVM = time.Minute
	// socketWait bounds the wait for QEMU to create its QMP socket, which
	// it does before the guest runs.
	socketWait = 10 * time.Second
	// powerdownWait is what a guest gets to power itself off before QEMU
	// is told to quit, and quitWait what QEMU gets before it is killed.
	powerdownWait = 10 * time.Second
	quitWait      = 3 * time.Second
	qmpTimeout    = 5 * time.Second
)

// ErrBootFailed says the guest stopped or never answered while booting;
// the error carries the serial console's panic line or last lines.
var ErrBootFailed = errors.New("vm guest did not boot")

// Guest is one virtual machine.
type Guest struct {
	*guest.Base
	env      guest.Env
	dir      string
	arch     string // Debian's name of the guest's architecture
	archSpec archSpec
	qemu     tools.Tool // the arch's QEMU
	machine  string
	vcpus    int
	memMiB   int64
	pins     []int
	disk     string
	clone    bool              // restore a saved template instead of booting
	nic      *vminit.NetConfig // nil without a network
	// memoryMerge offers the guest's RAM to KSM; the run switches KSM on.
	memoryMerge bool
	// sandbox confines QEMU (security: sandbox).
	sandbox bool
	// libvirt, when set, is the URI of the libvirt that runs QEMU.
	libvirt string
	// stopNotes are what the guest's record gets when it stops, under
	// their own lock: the undo that notes them runs under Base's.
	notesMu   sync.Mutex
	stopNotes map[string]string
}

func (g *Guest) Start(ctx context.Context) error { return g.Launch(ctx, g.start) }

// vm is one QEMU process and what watches it.
type vm struct {
	cmd *exec.Cmd // nil when libvirt started QEMU
	pid int
	// dialAgent reaches the agent's port on another host, and readFile
	// reads its console log there; nil, here.
	dialAgent agent.Dialer
	readFile  func(path string) ([]byte, error)
	exited    chan struct{} // closed once QEMU is reaped
	err       error         // QEMU's exit, valid after exited
	mon       monitor
	booted    bool // the guest's init runs and can power the machine off
	// paused: the guest's vCPUs are stopped (a template once its state is
	// saved), so it cannot answer the power button.
	paused bool
	// noPowerButton: the guest's kernel cannot see QEMU's power button, so
	// stopping it quits QEMU at once (its disk goes with it anyway).
	noPowerButton bool
}

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	fail := func(err error) (*agent.Client, guest.Info, error) { return nil, guest.Info{}, err }
	spec := g.Spec()
	qemuTool := g.qemu
	qemuImg, err := tools.Find("qemu-img")
	if err != nil {
		return fail(fmt.Errorf("%w: %v", guest.ErrNotSupported, err))
	}
	img, err := image.ForRootFS(g.env.RootFS)
	if err != nil {
		return fail(err)
	}
	boot, probeKernel, err := vmBoot(ctx, img, spec, g.env.Say)
	if err != nil {
		return fail(err)
	}
	var lv *libvirtConn
	if g.libvirt != "" {
		if lv, err = dialLibvirt(ctx, g.libvirt, ""); err != nil {
			return fail(err)
		}
		// A connection that fails to close leaves nothing behind: what
		// was made through it has undos of their own that reconnect.
		undo.Push(func() error { _ = lv.Close(); return nil })
	}
	remoteHost := lv != nil && lv.uri.Remote
	var accel, accelWhy string
	switch {
	case emulated(g.arch):
		accel, accelWhy = AccelTCG, fmt.Sprintf("emulation: the guest is %s, the host %s", g.arch, image.HostArch)
	case remoteHost:
		accel, accelWhy, err = remoteAccel(lv, spec.Accel)
	default:
		accel, accelWhy, err = chooseAccel(ctx, spec.Accel, qemuTool, probeKernel, filepath.Join(img.Dir, kvmAnswerFile), g.env.Say)
	}
	if err != nil {
		return fail(err)
	}
	details := map[string]string{"arch": g.arch, "security": guest.SecurityUnconfined}

	var tscKHz int64
	if accel == AccelTCG && !emulated(g.arch) && !remoteHost {
		// Under TCG the guest's TSC is the host's (under KVM the guest
		// has kvmclock and needs no help); another host's TSC is not
		// this one's, and its guest calibrates its own.
		tscKHz = hostTSCkHz()
		details["tsc_khz"] = strconv.FormatInt(tscKHz, 10)
	}

	led := g.env.Ledger
	if err := undo.MakeDir(led, g.dir); err != nil {
		return fail(err)
	}
	cfg := launchConfig{
		Name: spec.Name, Arch: g.arch, Machine: g.machine, Accel: accel, VCPUs: g.vcpus, MemoryMiB: g.memMiB,
		Kernel: boot.Kernel, Initramfs: boot.Initramfs,
		Cmdline:     kernelCmdline(g.archSpec.console, boot.Root, spec.Name, g.env.AgentPath, guest.ScratchDir, tscKHz, g.nic),
		AgentSocket: filepath.Join(g.dir, "agent.sock"), QMPSocket: filepath.Join(g.dir, "qmp.sock"),
		ConsoleLog: filepath.Join(g.dir, "console.log"),
	}
	diskMode, base, baseFormat := g.disk, boot.BaseDisk, formatQCOW2
	if diskMode == "" {
		diskMode = DiskOverlay
	}
	if _, ok := spec.LibvirtDomain(); ok {
		var dom userDomain
		if spec, dom, err = domainSpec(ctx, spec); err != nil {
			return fail(err)
		}
		maps.Copy(details, dom.details())
		if diskMode == DiskOverlay {
			// A copy is the guest's own once made; an overlay reads the
			// domain's disk all along. QEMU's image locks keep the domain
			// from starting while the guest's QEMU holds the overlay, where
			// the file system has them (not all NFS mounts do), and do not
			// cover the moments before it opens it.
			watch, err := watchSource(g.libvirt, dom)
			if err != nil {
				return fail(err)
			}
			// First in, so last out: checked once the guest's own domain
			// is gone.
			undo.Push(func() error { g.checkSource(watch); return nil })
		}
	}
	if spec.Image != "" {
		user, err := g.userBoot(ctx, spec, qemuImg.Path, tscKHz, filepath.Join(img.Dir, besideDir))
		if err != nil {
			return fail(err)
		}
		cfg.Kernel, cfg.Initramfs, cfg.Cmdline = spec.Boot.Kernel, user.initramfs, user.cmdline
		cfg.Firmware, cfg.Seed = user.firmware, user.seed
		base, baseFormat = spec.Image, user.disk.Format
		maps.Copy(details, user.details())
	}
	var extra []*os.File
	defer func() {
		// QEMU has its own copies now; ours go, so that a device is free
		// again once QEMU exits.
		for _, f := range extra {
			f.Close()
		}
	}()
	var tpl template
	stateFD := 0
	if g.clone {
		shape := templateShape{
			QEMU: qemuIdentity(ctx, qemuTool), Machine: g.machine, Accel: accel, VCPUs: g.vcpus, MemoryMiB: g.memMiB,
			Kernel: boot.Kernel, Initramfs: boot.Initramfs, BaseDisk: boot.BaseDisk, NIC: spec.Tap != nil,
			OffloadsOff: spec.Tap != nil && spec.Tap.OffloadsOff != "",
		}
		// The template boots as no guest in particular: no address, its
		// own name; a clone takes its identity after the restore.
		cfg.Cmdline = kernelCmdline(g.archSpec.console, boot.Root, "template", g.env.AgentPath, guest.ScratchDir, tscKHz, nil)
		cfg.TranslationMiB = cloneTranslationMiB
		shape.Cmdline = cfg.Cmdline
		if tpl, err = ensureTemplate(ctx, templateBuilder{qemu: qemuTool.Path, qemuImg: qemuImg.Path, cfg: cfg, env: g.env}, shape); err != nil {
			return fail(err)
		}
		state, err := os.Open(tpl.State)
		if err != nil {
			return fail(err)
		}
		stateFD = 3 + len(extra)
		extra = append(extra, state)
		cfg.RAM = &ramFile{Path: tpl.RAM}
		cfg.Incoming = true
		base = tpl.Disk
	}
	cfg.Disk, cfg.DiskFormat = filepath.Join(g.dir, "disk."+diskFormat(diskMode)), diskFormat(diskMode)
	cfg.MemoryMerge = g.memoryMerge
	if remoteHost {
		err = stageRemote(ctx, lv, domainName(g.env.RunID, spec.Name), qemuImg.Path, base, baseFormat, &cfg, led, undo)
	} else {
		err = makeDisk(ctx, qemuImg.Path, diskMode, base, baseFormat, cfg.Disk)
	}
	if err != nil {
		return fail(err)
	}
	if t := spec.Tap; t != nil && t.Root {
		cfg.NIC = &nicConfig{Tap: t.Name, MAC: g.nic.MAC.String(), OffloadsOff: t.OffloadsOff != ""}
		vhostState := "libvirt's: on when /dev/vhost-net opens"
		if accel != AccelKVM {
			vhostState = "off: used with KVM only, this VM runs under " + accel
		}
		maps.Copy(details, map[string]string{"net.tap": t.Name, "net.device": netpath.VMTap.String(), "net.addr": t.Addr.String(),
			"net.mac": g.nic.MAC.String(), "net.vhost": vhostState, "net.offload": nicOffloads(t.OffloadsOff, false)})
	} else if t != nil {
		dev, kind, err := netpath.OpenVMDevice(t.NSPath, t.Name)
		if err != nil {
			return fail(err)
		}
		cfg.NIC = &nicConfig{MAC: g.nic.MAC.String(), OffloadsOff: t.OffloadsOff != "", Stream: kind == netpath.VMPasst}
		vhostState, offload := "off: passt moves the frames, through a stream", nicOffloads(t.OffloadsOff, cfg.NIC.Stream)
		switch {
		case kind == netpath.VMVFIO:
			cfg.NIC.VFIO = t.Name
			vhostState, offload = "off: the VM's own driver runs the lent device", "the lent device's own, as its driver in the VM sets them"
		default:
			cfg.NIC.FD = 3 + len(extra)
			extra = append(extra, dev)
			if !cfg.NIC.Stream {
				var vhost *os.File
				if vhost, vhostState = openVhostNet(accel, VhostNetDevice); vhost != nil {
					cfg.NIC.VhostFD = 3 + len(extra)
					extra = append(extra, vhost)
				}
			}
		}
		maps.Copy(details, map[string]string{"net.tap": t.Name, "net.device": kind.String(), "net.addr": t.Addr.String(),
			"net.mac": g.nic.MAC.String(), "net.vhost": vhostState, "net.offload": offload})
	}
	var cred *syscall.Credential
	if g.sandbox {
		if cred, err = g.confine(&cfg, accel, img, base); err != nil {
			return fail(err)
		}
		maps.Copy(details, map[string]string{"security": guest.SecuritySandbox, "qemu_sandbox": sandboxFilter, "qemu_user": strconv.Itoa(int(cred.Uid))})
	}
	var m *vm
	if lv != nil {
		if m, err = g.startDomain(ctx, lv, cfg, undo); err == nil {
			details["libvirt"] = g.libvirt
			details["libvirt_domain"] = domainName(g.env.RunID, spec.Name)
			// Not security sandbox, which is vfleet's own user as well as
			// the filter; what libvirt set is recorded as it is.
			details["qemu_sandbox"], details["qemu_user"], err = domainConfinement(ctx, lv, m.pid)
		}
	} else {
		m, err = startQEMU(qemuTool.Path, cfg, cred, extra, filepath.Join(g.dir, "qemu.log"), g.env, undo)
	}
	if err != nil {
		return fail(err)
	}
	if spec.Image == "" && image.PowerButtonModule(g.arch) == "" {
		m.noPowerButton = true
		details["stop"] = "quit: vfleet's " + g.arch + " kernel has no driver for the machine's power button"
	}
	launched := time.Now()

	var mon *qmpClient
	if m.mon == nil {
		sctx, cancel := context.WithTimeout(ctx, socketWait)
		mon, err = waitQMP(sctx, cfg.QMPSocket, m.exited)
		cancel()
		if err != nil {
			return fail(bootError(m, g.dir, cfg.ConsoleLog, err))
		}
		m.mon = mon
	}
	// Where a clone's start goes: QEMU up to its monitor, the state
	// loaded and running, the agent's hello, the identity taken on.
	steps := map[string]string{"clone_qemu_up": time.Since(launched).String()}
	if g.clone {
		rctx, rcancel := context.WithTimeout(ctx, socketWait)
		err := mon.restoreState(rctx, stateFD)
		rcancel()
		if err != nil {
			return fail(bootError(m, g.dir, cfg.ConsoleLog, fmt.Errorf("restore the template's state: %w", err)))
		}
		steps["clone_restored"] = time.Since(launched).String()
	}
	client, err := waitAgent(ctx, m, cfg, readyTimeout(accel, spec.Image != ""))
	if err != nil {
		if cfg.Firmware != nil {
			console, _ := os.ReadFile(cfg.ConsoleLog)
			if h := seedHint(console); h != "" {
				err = fmt.Errorf("%w\n%s", err, h)
			}
		}
		return fail(err)
	}
	keep := false
	defer func() {
		if !keep {
			client.Close()
		}
	}()
	if g.clone {
		steps["clone_agent_hello"] = time.Since(launched).String()
		if err := g.become(ctx, client); err != nil {
			return fail(err)
		}
		maps.Copy(details, steps)
	}
	ready := time.Since(launched)

	qctx, qcancel := context.WithTimeout(ctx, qmpTimeout)
	defer qcancel()
	threads, err := m.mon.VCPUThreads(qctx)
	if err != nil {
		return fail(err)
	}
	maps.Copy(details, map[string]string{
		"machine": g.machine, "accel": accel, "accel_choice": accelWhy, "launch": LaunchBoot,
		"vcpus": strconv.Itoa(g.vcpus), "memory_mib": strconv.FormatInt(g.memMiB, 10),
		"vcpu_threads": joinInts(threads), "disk": diskMode, "disk_path": cfg.Disk,
		"memory_merge": onOff(g.memoryMerge),
		"kernel":       cfg.Kernel, "console_log": cfg.ConsoleLog,
		"qemu_start_to_ready":   ready.String(),
		"guest_uptime_at_ready": strconv.FormatFloat(client.Hello().KernelUptime, 'f', 2, 64) + "s",
	})
	// Not Info.AgentAddr, where clients may come at once: this channel
	// serves one at a time, and the vfleet that started the VM holds it. A
	// fleet's later commands reach the VM here once its `up` has exited.
	details["agent_socket"] = cfg.AgentSocket
	if g.clone {
		maps.Copy(details, cloneDetails(tpl))
	}
	// A domain's pins and scheduling are its <cputune>, set by libvirt.
	if g.pins != nil && g.libvirt == "" {
		if err := pinThreads(threads, g.pins); err != nil {
			return fail(err)
		}
	}
	if g.pins != nil {
		details["vcpu_pins"] = joinInts(g.pins)
	}
	if spec.RTPriority > 0 {
		if g.libvirt == "" {
			if err := makeRealtime(threads, spec.RTPriority); err != nil {
				return fail(err)
			}
		}
		details["vcpu_policy"] = "SCHED_FIFO " + strconv.Itoa(spec.RTPriority)
	}
	pids := []int{m.pid}
	if remoteHost {
		// Another host's process: nothing here may read or signal it.
		pids = nil
		details["libvirt_qemu_pid"] = strconv.Itoa(m.pid)
		host, err := remoteHostDetails(ctx, lv, client)
		if err != nil {
			return fail(err)
		}
		maps.Copy(details, host)
	}
	keep = true
	return client, guest.Info{
		Kind: KindName, Runtime: g.machine, PIDs: pids,
		ScratchDir: guest.ScratchDir, Details: details,
	}, nil
}

// checkSource notes in the guest's record, and says, that the user's
// domain it copies ran while the guest used its disk. Not an error: the
// guest stopped, and what it measured is in the run, to be read with that.
func (g *Guest) checkSource(w sourceWatch) {
	ctx, cancel := context.WithTimeout(context.Background(), qmpTimeout)
	defer cancel()
	ran := w.ranMeanwhile(ctx)
	if ran == "" {
		return
	}
	g.env.Say(fmt.Sprintf("warning: guest %s: libvirt domain %s may have run while the guest ran on its disk: %s; the guest's figures may not be those of the disk it started from", g.Spec().Name, w.domain, ran))
	g.notesMu.Lock()
	defer g.notesMu.Unlock()
	g.stopNotes = map[string]string{detailSourceRan: ran}
}

// Info is the guest's, with what its stop noted.
func (g *Guest) Info() guest.Info {
	info := g.Base.Info()
	g.notesMu.Lock()
	defer g.notesMu.Unlock()
	if len(g.stopNotes) > 0 {
		info.Details = maps.Clone(info.Details)
		if info.Details == nil {
			info.Details = map[string]string{}
		}
		maps.Copy(info.Details, g.stopNotes)
	}
	return info
}

// confine readies a sandboxed QEMU's start: QEMU's seccomp filter, and
// an unprivileged user that owns the guest's directory and can read every
// other file QEMU opens.
func (g *Guest) confine(cfg *launchConfig, accel string, img *image.Image, baseDisk string) (*syscall.Credential, error) {
	cred, err := sandboxCredential(accel)
	if err != nil {
		return nil, err
	}
	cfg.Sandbox = true
	fwVars := ""
	if cfg.Firmware != nil {
		fwVars = g.archSpec.uefi.vars
	}
	reads, err := sandboxReads(*cfg, g.Spec().Boot.Initrd, fwVars, baseDisk)
	if err != nil {
		return nil, err
	}
	roots := []string{filepath.Dir(filepath.Dir(g.env.StateDir)), filepath.Dir(filepath.Dir(img.Dir))}
	return cred, openToSandbox(g.dir, roots, reads)
}

// readyTimeout bounds the wait for a booting guest's agent.
func readyTimeout(accel string, userDisk bool) time.Duration {
	switch {
	case accel == AccelKVM && userDisk:
		return userReadyTimeoutKVM
	case accel == AccelKVM:
		return readyTimeoutKVM
	case userDisk:
		return userReadyTimeoutTCG
	}
	return readyTimeoutTCG
}

// startQEMU starts QEMU with its output in logPath, records it and
// pushes its stop. extra are files QEMU inherits as descriptors 3, 4, ….
// A sandboxed QEMU runs as cred; nil runs it as vfleet's own user.
func startQEMU(qemu string, cfg launchConfig, cred *syscall.Credential, extra []*os.File, logPath string, env guest.Env, undo *guest.Teardown) (*vm, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(qemu, qemuArgv(cfg)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = env.ProcAttr()
	cmd.SysProcAttr.Credential = cred
	if err := env.StartContained(cfg.Name, cmd, cmd.Start, undo); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	m := &vm{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { m.err = cmd.Wait(); close(m.exited) }()
	pidEntry, recErr := env.Ledger.RecordProcess(cmd.Process.Pid)
	undo.Push(func() error {
		m.stop()
		if recErr != nil {
			return nil
		}
		return env.Ledger.Done(pidEntry)
	})
	if recErr != nil {
		return nil, unrecorded(m, logPath, recErr)
	}
	return m, nil
}

// exitedGrace is how long a QEMU that could not be recorded gets to be
// reaped: its /proc entry is gone once it is.
const exitedGrace = time.Second

// unrecorded explains a QEMU that could not be recorded: one that exited
// at once (a bad option, a missing file) was already reaped, and what it
// said is the reason, not its missing /proc entry.
func unrecorded(m *vm, logPath string, recErr error) error {
	select {
	case <-m.exited:
		return fmt.Errorf("start qemu: %w", qemuExited(m, logPath))
	case <-time.After(exitedGrace):
		return recErr
	}
}

// stop ends QEMU: a booted guest is asked to power off, then QEMU to quit,
// then it is killed; each step is bounded.
func (m *vm) stop() {
	wait := func(d time.Duration) bool {
		select {
		case <-m.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	if m.mon != nil {
		ask := func(f func(context.Context) error) {
			ctx, cancel := context.WithTimeout(context.Background(), qmpTimeout)
			defer cancel()
			_ = f(ctx)
		}
		pressed := m.booted && !m.noPowerButton && !m.paused
		if pressed {
			ask(m.mon.Powerdown)
		}
		if !pressed || !wait(powerdownWait) {
			ask(m.mon.Quit)
		}
		m.mon.Close()
	}
	// libvirt's destroy (Quit) has killed its QEMU when it returns.
	if !wait(quitWait) && m.cmd != nil {
		_ = syscall.Kill(-m.pid, syscall.SIGKILL)
		<-m.exited
	}
}

// waitQMP dials QEMU's monitor socket until QEMU has made it.
func waitQMP(ctx context.Context, path string, exited <-chan struct{}) (*qmpClient, error) {
	for {
		q, err := dialQMP(ctx, path)
		if err == nil {
			return q, nil
		}
		select {
		case <-exited:
			return nil, errors.New("qemu exited")
		case <-ctx.Done():
			return nil, fmt.Errorf("qmp socket: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// bootError explains a failed boot with what QEMU (its log in dir) and the
// guest's console said: a kernel panic line when there is one, else the
// console's last lines, and QEMU's own complaint when it exited.
func bootError(m *vm, dir, consoleLog string, cause error) error {
	select {
	case <-m.exited:
		cause = qemuExited(m, filepath.Join(dir, "qemu.log"))
	default:
	}
	console, _ := m.read(consoleLog)
	if h := bootHint(console); h != "" {
		cause = fmt.Errorf("%w (%s)", cause, h)
	}
	if crash := GoCrash(console); crash != "" {
		cause = fmt.Errorf("%w; vfleet's agent crashed: %s", cause, crash)
	}
	if p := PanicLine(console); p != "" {
		if why := InitError(console); why != "" {
			return fmt.Errorf("%w: %v; guest init: %s; guest kernel: %s", ErrBootFailed, cause, why, p)
		}
		return fmt.Errorf("%w: %v; guest kernel: %s", ErrBootFailed, cause, p)
	}
	return fmt.Errorf("%w: %v; serial console ends:\n%s", ErrBootFailed, cause, tailLines(console, 15))
}

// read reads a file of the host QEMU runs on.
func (m *vm) read(path string) ([]byte, error) {
	if m.readFile != nil {
		return m.readFile(path)
	}
	return os.ReadFile(path)
}

// qemuExited says why QEMU, which has exited, did: its exit status and
// the end of its log (its stdout and stderr).
func qemuExited(m *vm, logPath string) error {
	qlog, _ := os.ReadFile(logPath)
	switch said := tailLines(qlog, 5); {
	case m.err == nil:
		// -no-reboot: the guest reset or powered itself off.
		return errors.New("qemu exited: the guest rebooted or powered off")
	case said == "":
		return fmt.Errorf("qemu exited (%v)", m.err)
	default:
		return fmt.Errorf("qemu exited (%v): %s", m.err, said)
	}
}

// makeDisk gives the guest its own disk of base's contents (base is in
// baseFormat): a qcow2 overlay backed by base, or a private image (qcow2
// or raw) converted from it, which holds everything base's backing chain
// does.
func makeDisk(ctx context.Context, qemuImg, mode, base, baseFormat, dst string) error {
	argv := []string{"create", "-q", "-f", formatQCOW2, "-F", baseFormat, "-b", base, dst}
	if mode != DiskOverlay {
		argv = []string{"convert", "-q", "-f", baseFormat, "-O", diskFormat(mode), base, dst}
	}
	out, err := exec.CommandContext(ctx, qemuImg, argv...).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("qemu-img %s: %w: %s", argv[0], err, out)
	}
	return nil
}

// diskFormat is the image format of a disk mode.
func diskFormat(mode string) string {
	if mode == DiskRaw {
		return formatRaw
	}
	return formatQCOW2
}
