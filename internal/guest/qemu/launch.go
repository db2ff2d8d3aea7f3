package qemu

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/tools"
)

// A guest starts in one of four ways, each a launcher: vfleet's own QEMU
// booting the guest (launch_direct.go), or resuming a template's saved
// state (launch_clone.go), or libvirt's QEMU on this host
// (launch_libvirt.go) or on another (launch_remote.go). Start works out
// what they share once, as a launch, and each launcher adds its own steps
// and pushes their undos on the guest's teardown as it takes them.
type launcher interface {
	// accel chooses the accelerator on the host that runs QEMU.
	accel(ctx context.Context, s *launch) (accelChoice, error)
	// stage makes what s.cfg names, where QEMU runs: the guest's disk over
	// s.base, its card, and whatever else its QEMU opens.
	stage(ctx context.Context, s *launch, undo *guest.Teardown) error
	// start starts QEMU on s.cfg and sets s.launched.
	start(ctx context.Context, s *launch, undo *guest.Teardown) (*vm, error)
	// await waits until the guest's agent answers as the guest's own.
	await(ctx context.Context, s *launch, m *vm) (*agent.Client, error)
	// settle finishes the start once the agent answered; threads are the
	// guest's vCPU threads.
	settle(ctx context.Context, s *launch, m *vm, client *agent.Client, threads []int) error
}

// launch is what every way of starting the guest shares.
type launch struct {
	// spec is the guest's, with a user's domain in it resolved to the
	// user's disk.
	spec        guest.Spec
	img         *image.Image
	boot        image.VMBoot
	probeKernel string // the kernel that tells whether KVM boots
	qemuImg     string
	accel       accelChoice
	cfg         launchConfig
	diskMode    string
	// The guest's disk is made from base, in baseFormat.
	base, baseFormat string
	// extra are the files QEMU inherits; once it has them, ours are closed
	// so that a device is free again when QEMU exits.
	extra    []*os.File
	details  map[string]string
	launched time.Time
	// pids are the guest's processes on this host.
	pids []int
}

// accelChoice is the accelerator a guest runs under, and why.
type accelChoice struct {
	name, why string
	// hostTSC: the guest's TSC is this host's (TCG on this host), so it
	// is told its frequency, tscKHz, rather than calibrating its own.
	hostTSC bool
	tscKHz  int64
}

// inherit hands QEMU f and returns its descriptor number there.
func (s *launch) inherit(f *os.File) int {
	s.extra = append(s.extra, f)
	return 2 + len(s.extra)
}

func (s *launch) closeExtra() {
	for _, f := range s.extra {
		f.Close()
	}
}

// makeDisk makes the guest's disk on this host.
func (s *launch) makeDisk(ctx context.Context) error {
	return makeDisk(ctx, s.qemuImg, s.diskMode, s.base, s.baseFormat, s.cfg.Disk)
}

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	fail := func(err error) (*agent.Client, guest.Info, error) { return nil, guest.Info{}, err }
	s, err := g.bootFiles(ctx)
	if err != nil {
		return fail(err)
	}
	l, err := g.launcher(ctx, undo)
	if err != nil {
		return fail(err)
	}
	if s.accel, err = l.accel(ctx, s); err != nil {
		return fail(err)
	}
	defer s.closeExtra()
	if err := g.configure(ctx, s, undo); err != nil {
		return fail(err)
	}
	if err := l.stage(ctx, s, undo); err != nil {
		return fail(err)
	}
	m, err := l.start(ctx, s, undo)
	if err != nil {
		return fail(err)
	}
	s.pids = []int{m.pid}
	if s.spec.Image == "" && image.PowerButtonModule(g.arch) == "" {
		m.noPowerButton = true
		s.details["stop"] = "quit: vfleet's " + g.arch + " kernel has no driver for the machine's power button"
	}
	client, err := l.await(ctx, s, m)
	if err != nil {
		return fail(err)
	}
	keep := false
	defer func() {
		if !keep {
			client.Close()
		}
	}()
	ready := time.Since(s.launched)

	qctx, qcancel := context.WithTimeout(ctx, qmpTimeout)
	defer qcancel()
	threads, err := m.mon.VCPUThreads(qctx)
	if err != nil {
		return fail(err)
	}
	g.noteReady(s, client.Hello(), threads, ready)
	if err := l.settle(ctx, s, m, client, threads); err != nil {
		return fail(err)
	}
	keep = true
	return client, guest.Info{
		Kind: KindName, Runtime: g.machine, PIDs: s.pids,
		ScratchDir: guest.ScratchDir, Details: s.details,
	}, nil
}

// noteReady is what the record of a guest that started says of its
// launch; ready is how long its agent took to answer.
func (g *Guest) noteReady(s *launch, hello agent.Hello, threads []int, ready time.Duration) {
	maps.Copy(s.details, map[string]string{
		"machine": g.machine, "accel": s.accel.name, "accel_choice": s.accel.why, "launch": LaunchBoot,
		"vcpus": strconv.Itoa(g.vcpus), "memory_mib": strconv.FormatInt(g.memMiB, 10),
		"vcpu_threads": joinInts(threads), "disk": s.diskMode, "disk_path": s.cfg.Disk,
		"memory_merge": onOff(g.memoryMerge),
		"kernel":       s.cfg.Kernel, "console_log": s.cfg.ConsoleLog,
		"qemu_start_to_ready":   ready.String(),
		"guest_uptime_at_ready": strconv.FormatFloat(hello.KernelUptime, 'f', 2, 64) + "s",
	})
	// Not Info.AgentAddr, where clients may come at once: this channel
	// serves one at a time, and the vfleet that started the VM holds it. A
	// fleet's later commands reach the VM here once its `up` has exited.
	s.details["agent_socket"] = s.cfg.AgentSocket
	if g.pins != nil {
		s.details["vcpu_pins"] = joinInts(g.pins)
	}
	if s.spec.RTPriority > 0 {
		s.details["vcpu_policy"] = "SCHED_FIFO " + strconv.Itoa(s.spec.RTPriority)
	}
}

// bootFiles finds what the guest boots from: vfleet's image, and for a
// guest of that image its VM boot files, made once for every guest.
func (g *Guest) bootFiles(ctx context.Context) (*launch, error) {
	qemuImg, err := tools.Find("qemu-img")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	s := &launch{spec: g.Spec(), qemuImg: qemuImg.Path}
	if s.img, err = image.ForRootFS(g.env.RootFS); err != nil {
		return nil, err
	}
	if s.boot, s.probeKernel, err = vmBoot(ctx, s.img, s.spec, g.env.Say); err != nil {
		return nil, err
	}
	return s, nil
}

// launcher is the guest's way of starting; a libvirt's is connected, and
// the connection's close is the first undo.
func (g *Guest) launcher(ctx context.Context, undo *guest.Teardown) (launcher, error) {
	if g.libvirt == "" {
		d := directLauncher{g: g}
		if g.clone {
			return &cloneLauncher{directLauncher: d}, nil
		}
		return &d, nil
	}
	c, err := dialLibvirt(ctx, g.libvirt, "")
	if err != nil {
		return nil, err
	}
	// A connection that fails to close leaves nothing behind: what was
	// made through it has undos of their own that reconnect.
	undo.Push(func() error { _ = c.Close(); return nil })
	l := libvirtLauncher{g: g, conn: c}
	if c.uri.Remote {
		return &remoteLauncher{libvirtLauncher: l}, nil
	}
	return &l, nil
}

// localAccel chooses the accelerator of a QEMU on this host: an emulated
// arch's is TCG, and KVM is used only where a kernel really boots under it.
func (g *Guest) localAccel(ctx context.Context, s *launch) (accelChoice, error) {
	if emulated(g.arch) {
		return accelChoice{name: AccelTCG, why: fmt.Sprintf("emulation: the guest is %s, the host %s", g.arch, image.HostArch)}, nil
	}
	accel, why, err := chooseAccel(ctx, s.spec.Accel, g.qemu, s.probeKernel, filepath.Join(s.img.Dir, kvmAnswerFile), g.env.Say)
	if err != nil {
		return accelChoice{}, err
	}
	c := accelChoice{name: accel, why: why}
	if accel == AccelTCG {
		// Under KVM the guest has kvmclock and needs no help.
		c.hostTSC, c.tscKHz = true, hostTSCkHz()
	}
	return c, nil
}

// configure records and makes the guest's directory and works out the
// launch every way of starting shares: the kernel and its command line,
// the disk, and a user's disk or domain in place of vfleet's image.
func (g *Guest) configure(ctx context.Context, s *launch, undo *guest.Teardown) error {
	s.details = map[string]string{"arch": g.arch, "security": guest.SecurityUnconfined}
	if s.accel.hostTSC {
		s.details["tsc_khz"] = strconv.FormatInt(s.accel.tscKHz, 10)
	}
	if err := undo.MakeDir(g.env.Ledger, g.dir); err != nil {
		return err
	}
	s.cfg = launchConfig{
		Name: s.spec.Name, Arch: g.arch, Machine: g.machine, Accel: s.accel.name, VCPUs: g.vcpus, MemoryMiB: g.memMiB,
		Kernel: s.boot.Kernel, Initramfs: s.boot.Initramfs,
		Cmdline:     kernelCmdline(g.archSpec.console, s.boot.Root, s.spec.Name, g.env.AgentPath, guest.ScratchDir, s.accel.tscKHz, g.nic),
		AgentSocket: filepath.Join(g.dir, "agent.sock"), QMPSocket: filepath.Join(g.dir, "qmp.sock"),
		ConsoleLog: filepath.Join(g.dir, "console.log"),
	}
	s.diskMode, s.base, s.baseFormat = g.disk, s.boot.BaseDisk, formatQCOW2
	if s.diskMode == "" {
		s.diskMode = DiskOverlay
	}
	if err := g.userDisk(ctx, s, undo); err != nil {
		return err
	}
	s.cfg.Disk, s.cfg.DiskFormat = filepath.Join(g.dir, "disk."+diskFormat(s.diskMode)), diskFormat(s.diskMode)
	s.cfg.MemoryMerge = g.memoryMerge
	return nil
}

// awaitAgent waits for the agent of a booting guest; for a guest booted
// through UEFI, whose agent comes from a cloud-init seed, the error adds
// what the console says of the seed.
func awaitAgent(ctx context.Context, s *launch, m *vm) (*agent.Client, error) {
	client, err := waitAgent(ctx, m, s.cfg, readyTimeout(s.accel.name, s.spec.Image != ""))
	if err != nil && s.cfg.Firmware != nil {
		console, _ := os.ReadFile(s.cfg.ConsoleLog)
		if h := seedHint(console); h != "" {
			err = fmt.Errorf("%w\n%s", err, h)
		}
	}
	return client, err
}

// noteNIC is what the guest's record says of its card on tap t.
func (g *Guest) noteNIC(s *launch, t *guest.TapConfig, device, vhost, offload string) {
	maps.Copy(s.details, map[string]string{"net.tap": t.Name, "net.device": device, "net.addr": t.Addr.String(),
		"net.mac": g.nic.MAC.String(), "net.vhost": vhost, "net.offload": offload})
}
