package qemu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
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
