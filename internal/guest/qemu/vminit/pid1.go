package vminit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/guest/identity"
)

// PID1Options configure the guest's init.
type PID1Options struct {
	// Agent is the argv of the serving agent, started as init's child and
	// restarted when it exits. The port device path is appended as the
	// argument after the last element.
	Agent []string
	// Workdir is created world-writable, for the workloads' files.
	Workdir string
}

const (
	// restartDelay keeps a crashing agent from spinning the guest's CPU.
	restartDelay = time.Second
	// shutdownGrace is what processes get between SIGTERM and SIGKILL.
	shutdownGrace = 2 * time.Second
)

// RunPID1 is the guest's init once the real root is mounted. It returns only
// when it cannot set the guest up; its caller then exits, the kernel panics
// and the host sees the reason on the serial console.
func RunPID1(o PID1Options) error {
	if os.Getpid() != 1 {
		return errors.New("--pid1 must be the guest's first process")
	}
	for _, m := range []mountPoint{
		{"proc", "/proc", "proc", 0},
		{"sysfs", "/sys", "sysfs", 0},
		{"devtmpfs", "/dev", "devtmpfs", 0},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV},
	} {
		if err := m.mount(); err != nil {
			return err
		}
	}
	// devtmpfs has no /dev/fd and /dev/std*, which udev or a container
	// runtime would add; tools write to them (sockperf --full-log
	// /dev/stdout).
	for name, target := range devLinks {
		if err := os.Symlink(target, name); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT, ""); err != nil {
		return fmt.Errorf("remount / read-write: %w", err)
	}
	// The kernel starts init with no PATH, and the agent finds the tools
	// it runs through its own.
	if err := os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"); err != nil {
		return err
	}
	params := readCmdline()
	if h := params[ParamHostname]; h != "" {
		if err := unix.Sethostname([]byte(h)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
		if err := identity.Write("/", h); err != nil {
			return err
		}
	}
	if o.Workdir != "" {
		if err := os.MkdirAll(o.Workdir, 0o1777); err != nil {
			return err
		}
	}
	if err := loopbackUp(); err != nil {
		logf("loopback: %v", err)
	}
	if v, ok := params[ParamNet]; ok {
		// The host asked for a network: a guest without it would only
		// fail its network workloads later, for no visible reason.
		c, err := ParseNetConfig(v)
		if err != nil {
			return err
		}
		if err := configureNet(c); err != nil {
			return err
		}
	}
	port := params[ParamPort]
	if port == "" {
		return fmt.Errorf("no %s= on the kernel command line", ParamPort)
	}

	poweroff := make(chan string, 1)
	request := func(why string) {
		select {
		case poweroff <- why:
		default:
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGPWR)
	go func() { request("signal " + (<-sigs).String()) }()
	watchPowerButton(func() { request("power button") })

	var mu sync.Mutex
	stopping := false
	agent := func() int {
		for {
			mu.Lock()
			if stopping {
				mu.Unlock()
				return 0
			}
			cmd := exec.Command(o.Agent[0], append(o.Agent[1:], "/dev/virtio-ports/"+port)...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			err := cmd.Start()
			mu.Unlock()
			if err == nil {
				return cmd.Process.Pid
			}
			logf("start agent: %v", err)
			time.Sleep(restartDelay)
		}
	}
	agentPID := agent()
	go func() {
		// Init reaps every orphan; the agent is one of its children, so
		// its exit shows here too, and it is started again.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.ECHILD) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			mu.Lock()
			ignore := err != nil || pid != agentPID || stopping
			mu.Unlock()
			if ignore {
				continue
			}
			logf("agent exited (%v); restarting it", ws)
			time.Sleep(restartDelay)
			agentPID = agent()
		}
	}()

	why := <-poweroff
	mu.Lock()
	stopping = true
	mu.Unlock()
	logf("powering off: %s", why)
	shutdown()
	return nil
}

// devLinks are the links every Linux /dev is expected to have.
var devLinks = map[string]string{
	"/dev/fd":     "/proc/self/fd",
	"/dev/stdin":  "/proc/self/fd/0",
	"/dev/stdout": "/proc/self/fd/1",
	"/dev/stderr": "/proc/self/fd/2",
}

// shutdown stops every process, leaves the root disk clean and powers the
// machine off; it does not return.
func shutdown() {
	_ = unix.Kill(-1, unix.SIGTERM)
	deadline := time.Now().Add(shutdownGrace)
	for time.Now().Before(deadline) && othersAlive() {
		time.Sleep(20 * time.Millisecond)
	}
	_ = unix.Kill(-1, unix.SIGKILL)
	unix.Sync()
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		logf("remount / read-only: %v", err)
	}
	unix.Sync()
	for {
		_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
		time.Sleep(time.Second)
	}
}

// othersAlive reports whether any process other than init and kernel
// threads is left; the reaper goroutine collects them as they exit.
func othersAlive() bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == 1 {
			continue
		}
		// Kernel threads have an empty cmdline.
		if b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); len(b) > 0 {
			return true
		}
	}
	return false
}

// KEY_POWER and EV_KEY from linux/input-event-codes.h.
const (
	evKey    = 0x01
	keyPower = 116
)

// watchPowerButton reads every input device for a press of the power key:
// QEMU's system_powerdown presses the ACPI power button, which the kernel
// turns into that key event, and without systemd or acpid nothing else in
// the guest would act on it.
func watchPowerButton(pressed func()) {
	devs, _ := filepath.Glob("/dev/input/event*")
	for _, d := range devs {
		f, err := os.Open(d)
		if err != nil {
			continue
		}
		go func() {
			defer f.Close()
			buf := make([]byte, inputEventSize)
			for {
				if _, err := io.ReadFull(f, buf); err != nil {
					return
				}
				if IsPowerKeyPress(buf) {
					pressed()
				}
			}
		}()
	}
}

// inputEventSize is sizeof(struct input_event) on 64-bit Linux: a 16-byte
// timeval, then type, code (16 bits each) and value (32 bits).
const inputEventSize = 24

// IsPowerKeyPress decodes one struct input_event.
func IsPowerKeyPress(ev []byte) bool {
	if len(ev) < inputEventSize {
		return false
	}
	typ := binary.LittleEndian.Uint16(ev[16:])
	code := binary.LittleEndian.Uint16(ev[18:])
	value := int32(binary.LittleEndian.Uint32(ev[20:]))
	return typ == evKey && code == keyPower && value == 1
}

// loopbackUp brings lo up: the kernel creates it down, and tools measuring
// over localhost need it.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vfleet init: "+format+"\n", args...)
}
