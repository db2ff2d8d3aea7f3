package guest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vfleet/vfleet/internal/cgroup"
)

// ProcAttr is how a kind whose guest is a child process of vfleet (the
// baseline's agent, a VM's QEMU) starts that process. Either way it leads
// its own process group, so that killing the group takes the tools it
// started along, and the terminal's Ctrl-C reaches vfleet alone, which
// then tears down in order.
//
// A run's guest gets a parent-death signal, so a killed vfleet leaves
// nothing running. A detached guest must outlive the vfleet that started
// it, so it has none: the signal fires when the thread that forked the
// child exits, and every thread of `vfleet fleet up` ends with it. It gets
// its own session instead, so no terminal's hang-up reaches it either.
func (e Env) ProcAttr() *syscall.SysProcAttr {
	if e.Detached {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// StartContained starts cmd through start (which calls cmd.Start) in a
// cgroup of the run's own, named for the guest, so that whatever the
// process starts — a tool that daemonizes included — is killed when the
// guest stops, or by `vfleet clean` after a crash. The cgroup is recorded
// before it exists and its release (kill, then remove) pushed on undo, to
// run after the process's own stop.
func (e Env) StartContained(name string, cmd *exec.Cmd, start func() error, undo *Teardown) error {
	path := cgroup.PathOf(e.RunID, name)
	entry, err := e.Ledger.Record(cgroup.Kind, path, nil)
	if err != nil {
		return err
	}
	undo.PushRelease(e.Ledger, entry)
	g, err := cgroup.Create(path)
	if err != nil {
		return err
	}
	return g.Start(cmd, start)
}

// defaultEnv is the environment a guest's agent, and so every tool it
// runs, gets in vfleet's own image.
var defaultEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}

// ProcessEnv is the environment of a guest's agent: vfleet's defaults,
// with the image's own variables (a user's OCI image config) in their
// place where they name the same one, as a container engine would start
// the image.
func (e Env) ProcessEnv() []string {
	out := append([]string(nil), defaultEnv...)
	for _, kv := range e.ImageEnv {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		replaced := false
		for i, d := range out {
			if strings.HasPrefix(d, name+"=") {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// CopyAgent puts the static agent at dst, inside a guest's own writable
// view of an image that lacks it.
func CopyAgent(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("agent: %w", err)
	}
	return out.Close()
}
