package remoterun

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAs starts argv with its executable copied to exe, so that
// /proc/PID/exe names exe, and records its pid in a run's scratch.
func startAs(t *testing.T, dir, run, exe string, stdin *os.File, argv ...string) *exec.Cmd {
	t.Helper()
	src, err := exec.LookPath(argv[0])
	if err != nil {
		t.Skipf("%s: %v", argv[0], err)
	}
	if exe == "" {
		exe = src
	} else if b, err := os.ReadFile(src); err != nil || os.WriteFile(exe, b, 0o755) != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	scratch := filepath.Join(dir, "runs", run)
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, pidName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// clean --on stops the vfleet of each run's scratch, by SIGTERM and then
// SIGKILL when it will not end, and no process that is not vfleet's there
// whose pid a stale file names.
func TestStopScript(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	vfleet := filepath.Join(dir, "bin", "vfleet")
	// A pipe that stays open: the shell's read waits on it forever.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	stubborn := startAs(t, dir, "run.a", vfleet, pr, "sh", "-c", `trap "" TERM; read x`)
	other := startAs(t, dir, "run.b", "", nil, "sleep", "60")

	out, err := exec.Command("sh", "-c", stopScript, "sh", dir, "1").Output()
	if err != nil {
		t.Fatalf("stop script: %v", err)
	}
	if got := strings.Fields(string(out)); len(got) != 1 || got[0] != strconv.Itoa(stubborn.Process.Pid) {
		t.Errorf("stopped %q; want only vfleet's pid %d", got, stubborn.Process.Pid)
	}
	ended := make(chan error, 1)
	go func() { ended <- stubborn.Wait() }()
	var ee *exec.ExitError
	select {
	case err := <-ended:
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("a vfleet ignoring SIGTERM: %v; want it killed", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("a vfleet ignoring SIGTERM still runs after the script")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a process not vfleet's was stopped: %v", err)
	}
}
