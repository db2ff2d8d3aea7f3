package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/flock"
	"github.com/vfleet/vfleet/internal/procfs"
)

// libvirtSocket is where the system libvirt daemon answers.
const libvirtSocket = "/run/libvirt/libvirt-sock"

// libvirtDaemons are what the system QEMU driver needs, in the order they
// start: the log daemon QEMU's output goes through, then libvirtd. Each
// writes its pid file once it has daemonised.
var libvirtDaemons = []struct{ program, pidFile string }{
	{"virtlogd", "/run/virtlogd.pid"},
	{"libvirtd", "/run/libvirtd.pid"},
}

// libvirtAutostartDir holds a link for each libvirt network that starts
// with the daemon.
const libvirtAutostartDir = "/etc/libvirt/qemu/networks/autostart"

// libvirtWait bounds a daemon's start.
const libvirtWait = 30 * time.Second

// RequiresLibvirt makes sure the system libvirt answers on its socket:
// where no init started it, the test starts virtlogd and libvirtd and
// stops them when it ends, or, in a package whose TestMain is Main, when
// the package's last test has run: each start is a daemon's whole
// start-up, paid once a package that way. It skips where libvirt is not
// installed.
// It refuses to start libvirtd while a network is marked to autostart
// (scripts/deps.sh unmarks them).
func RequiresLibvirt(t testing.TB) {
	t.Helper()
	RequiresRoot(t)
	RequiresTool(t, "libvirtd", "libvirt-daemon-system")
	if libvirtAnswers() {
		return
	}
	// Tests that share the machine may come here together from two test
	// processes: one starts the daemons, the other finds them answering.
	ctx, cancel := context.WithTimeout(context.Background(), 2*libvirtWait)
	defer cancel()
	unlock, err := flock.Lock(ctx, filepath.Join(filepath.Dir(machineLockFile()), "vfleet-tests-libvirt.lock"))
	if err != nil {
		t.Fatalf("start libvirtd: %v", err)
	}
	defer unlock()
	if libvirtAnswers() {
		return
	}
	// A network marked to autostart would start with libvirtd: a NAT
	// bridge and a DHCP server on addresses no test may use.
	if nets, _ := filepath.Glob(filepath.Join(libvirtAutostartDir, "*.xml")); len(nets) > 0 {
		t.Fatalf("libvirtd would start the networks %v: run scripts/deps.sh, which unmarks them", nets)
	}
	for _, d := range libvirtDaemons {
		if p, ok := daemonRunning(d.pidFile); ok {
			t.Logf("%s already runs (pid %d)", d.program, p.PID)
			continue
		}
		if out, err := exec.Command(d.program, "-d").CombinedOutput(); err != nil {
			t.Fatalf("start %s: %v\n%s", d.program, err, out)
		}
		p, ok := waitDaemon(d.pidFile)
		if !ok {
			t.Fatalf("%s did not write %s within %s", d.program, d.pidFile, libvirtWait)
		}
		stop := func() error { return stopDaemon(d.program, p) }
		if !atProcessEnd(stop) {
			t.Cleanup(func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	deadline := time.Now().Add(libvirtWait)
	for !libvirtAnswers() {
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd does not answer on %s within %s", libvirtSocket, libvirtWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func libvirtAnswers() bool {
	c, err := net.DialTimeout("unix", libvirtSocket, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// daemonRunning reads a daemon's pid file: the process it names, if alive.
func daemonRunning(pidFile string) (procfs.Process, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return procfs.Process{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return procfs.Process{}, false
	}
	p, err := procfs.Find(pid)
	if err != nil || !p.Alive() {
		return procfs.Process{}, false
	}
	return p, true
}

func waitDaemon(pidFile string) (procfs.Process, bool) {
	deadline := time.Now().Add(libvirtWait)
	for time.Now().Before(deadline) {
		if p, ok := daemonRunning(pidFile); ok {
			return p, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return procfs.Process{}, false
}

// stopDaemon ends a daemon the test started, and waits until it has.
func stopDaemon(program string, p procfs.Process) error {
	if !p.Alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(libvirtWait)
	for p.Alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s: killed", program, p.PID, libvirtWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
