package doctor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// bootedMarker is what the kernel prints on its console once it has
// booted far enough to look for a root filesystem. With no disk and no
// initrd it then panics, and panic=-1 with -no-reboot makes QEMU exit.
// Seeing the line proves the accelerator ran a whole kernel, not just
// firmware.
const bootedMarker = "Kernel panic - not syncing"

var (
	// errBootTimeout: the kernel did not reach bootedMarker in time.
	errBootTimeout = errors.New("guest kernel did not boot in time")
	// errQEMUExited: QEMU stopped before the kernel reached bootedMarker.
	errQEMUExited = errors.New("qemu exited before the guest kernel booted")
)

// bootArgv is QEMU's command line for a boot probe: no disk, no network,
// the serial console on stdout. KVM gets the host CPU model, as VM guests
// will; TCG emulates the richest model it has.
func bootArgv(qemu, accel, kernel string) []string {
	cpu, console := "max", "ttyS0"
	var machine []string
	if strings.HasSuffix(qemu, "aarch64") {
		// arm64 has no default machine; TCG's max would be slow.
		cpu, console, machine = "cortex-a72", "ttyAMA0", []string{"-machine", "virt"}
	}
	if accel == "kvm" {
		cpu = "host"
	}
	return append(machine,
		"-accel", accel, "-cpu", cpu, "-m", "256M", "-smp", "1",
		"-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", kernel, "-append", "console="+console+" panic=-1 loglevel=4",
	)
}

// hostQEMU is the QEMU that runs guests of this host's architecture,
// which is the one KVM can run.
func hostQEMU() string {
	if runtime.GOARCH == "arm64" {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}

// bootKernel boots kernel under qemu with the accelerator and returns how
// long the kernel took to print bootedMarker. QEMU runs in its own process
// group, which is killed before bootKernel returns, however it returns.
func bootKernel(ctx context.Context, qemu, accel, kernel string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Plain pipes rather than exec's copying: Wait then returns when QEMU
	// exits, even while something else in its group still holds them.
	console, consoleW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("boot under %s: %w", accel, err)
	}
	defer console.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		consoleW.Close()
		return 0, fmt.Errorf("boot under %s: %w", accel, err)
	}
	defer errR.Close()
	cmd := exec.Command(qemu, bootArgv(qemu, accel, kernel)...)
	cmd.Stdout, cmd.Stderr = consoleW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	err = cmd.Start()
	consoleW.Close()
	errW.Close()
	if err != nil {
		return 0, fmt.Errorf("boot under %s: %w", accel, err)
	}

	booted := make(chan time.Duration, 1)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			if strings.Contains(sc.Text(), bootedMarker) {
				booted <- time.Since(began)
				break
			}
		}
		// Keep draining so QEMU never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, console)
	}()
	var stderr bytes.Buffer
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(&stderr, io.LimitReader(errR, 64<<10))
		_, _ = io.Copy(io.Discard, errR)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// stop kills the whole group (QEMU may have started children), reaps
	// QEMU unless already reaped, and waits until the readers saw the pipes
	// close.
	stop := func(reaped bool) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if !reaped {
			<-exited
		}
		<-consoleDone
		<-stderrDone
	}
	select {
	case took := <-booted:
		stop(false)
		return took, nil
	case werr := <-exited:
		stop(true)
		// The marker may have been the last thing QEMU wrote.
		select {
		case took := <-booted:
			return took, nil
		default:
		}
		return 0, fmt.Errorf("%w (%v): %s", errQEMUExited, werr, qemuReason(stderr.String()))
	case <-ctx.Done():
		stop(false)
		return 0, fmt.Errorf("%w: no boot within %s", errBootTimeout, seconds(timeout))
	}
}

// qemuReason picks the line of QEMU's stderr that says why it stopped:
// the first error, since warnings come before it and an assertion's
// abort message after it; else the last line.
func qemuReason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		if strings.Contains(l, "error") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// seconds renders a duration the way doctor's lines do: "10 s", "2.3 s".
func seconds(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), ".0") + " s"
}

// accelProbe is one accelerator to prove by booting a kernel under it.
type accelProbe struct {
	accel   string // "kvm" or "tcg", as QEMU's -accel names them
	kernel  string // empty when there is no guest image
	timeout time.Duration
	// kvmDevice must open read-write before booting is worth trying;
	// empty for TCG.
	kvmDevice string
}

func checkAccel(ctx context.Context, p accelProbe) Result {
	if p.kvmDevice != "" {
		f, err := os.OpenFile(p.kvmDevice, os.O_RDWR, 0)
		if err != nil {
			return Result{Status: Missing, Detail: fmt.Sprintf("%v; VMs will run under TCG emulation", err),
				Fix: "enable hardware virtualisation (VT-x/AMD-V) and load kvm_intel or kvm_amd"}
		}
		f.Close()
	}
	qemu, _, missing := findTool(ctx, hostQEMU())
	if missing != nil {
		return Result{Status: Skip, Detail: "not probed: " + missing.Detail, Fix: missing.Fix}
	}
	if p.kernel == "" {
		return Result{Status: Skip, Detail: "not probed: no guest kernel (run `vfleet image build`)", Fix: "vfleet image build"}
	}
	took, err := bootKernel(ctx, qemu.Path, p.accel, p.kernel, p.timeout)
	return accelResult(p, took, err)
}

// accelResult turns a boot probe's outcome into what doctor says about the
// accelerator.
func accelResult(p accelProbe, took time.Duration, err error) Result {
	if err == nil {
		return Result{Status: OK, Detail: fmt.Sprintf("works (booted in %s)", seconds(took))}
	}
	why := err.Error()
	if errors.Is(err, errBootTimeout) {
		why = "a guest kernel did not boot within " + seconds(p.timeout)
	}
	if p.kvmDevice != "" {
		if errors.Is(err, errBootTimeout) {
			why += " (e.g. nested virtualisation without support)"
		}
		return Result{Status: Fail, Detail: p.kvmDevice + " present but " + why + "; VMs will run under TCG emulation"}
	}
	return Result{Status: Fail, Detail: why + " under emulation; VM guests cannot run on this host"}
}
