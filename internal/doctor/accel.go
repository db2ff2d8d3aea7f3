package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// bootedMarker is what a kernel prints once it has booted all the way to
// mounting a root filesystem; with no disk it then panics, and panic=-1
// with -no-reboot makes QEMU exit. Seeing it proves the accelerator ran a
// whole kernel, not just firmware.
const bootedMarker = "Kernel panic - not syncing"

// ProbeArgv is QEMU's command line for a boot probe. KVM gets the host CPU
// model, as VM guests will; TCG emulates the richest model it has.
func ProbeArgv(accel, kernel string) []string {
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	return []string{"-accel", accel, "-cpu", cpu, "-m", "256M", "-smp", "1",
		"-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", kernel, "-append", "console=ttyS0 panic=-1 loglevel=4"}
}

// BootProbe boots kernel under the accelerator and returns how long it took
// to boot, or why it did not within the timeout.
func BootProbe(ctx context.Context, accel, kernel string, timeout time.Duration) (time.Duration, error) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(qemu, ProbeArgv(accel, kernel)...)
	// Its own process group, so the timeout kills QEMU and nothing survives.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	booted := make(chan time.Duration, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), bootedMarker) {
				booted <- time.Since(began)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // keep QEMU from blocking on a full pipe
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	select {
	case d := <-booted:
		kill()
		return d, nil
	case err := <-exited:
		select {
		case d := <-booted:
			return d, nil
		default:
		}
		return 0, fmt.Errorf("QEMU exited before the kernel booted (%v): %s", err, lastLine(stderr.String()))
	case <-ctx.Done():
		kill()
		return 0, fmt.Errorf("the kernel did not boot within %s", timeout)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func checkAccel(ctx context.Context, accel, kernel string, timeout time.Duration) Result {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return Result{Status: Skip, Detail: "not probed: QEMU is not installed", Fix: installHint("qemu-system-x86_64")}
	}
	if accel == "kvm" {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return Result{Status: Missing, Detail: "no usable /dev/kvm (" + err.Error() + "); VMs will run under TCG emulation",
				Fix: "enable hardware virtualisation in the firmware and load the kvm_intel or kvm_amd module"}
		}
		f.Close()
	}
	if kernel == "" {
		return Result{Status: Skip, Detail: "not probed: " + errNoKernel.Error(), Fix: "vfleet image build"}
	}
	took, err := BootProbe(ctx, accel, kernel, timeout)
	switch {
	case err == nil:
		return Result{Status: OK, Detail: fmt.Sprintf("booted a guest kernel in %.1f s", took.Seconds())}
	case accel == "kvm":
		return Result{Status: Fail, Detail: "/dev/kvm is present but a guest kernel did not boot: " + err.Error() +
			" (e.g. nested virtualisation without support); VMs will run under TCG emulation"}
	default:
		return Result{Status: Fail, Detail: "emulation does not boot a guest kernel: " + err.Error()}
	}
}
