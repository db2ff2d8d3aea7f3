package netpath

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
)

// daemonStopTimeout is how long a path's daemon gets to exit after
// SIGTERM before it is killed.
const daemonStopTimeout = 5 * time.Second

// daemon is a process a path runs in the host side for the run (Open
// vSwitch's, passt), a child of vfleet.
type daemon struct {
	name  string
	cmd   *exec.Cmd
	log   string
	entry ledger.Entry
	// gone is done once the daemon has exited and been reaped.
	gone context.Context
}

// startDaemon starts cmd in the host side as the daemon name, in the
// foreground so that it is vfleet's child: its pid is known at once, and
// no pidfile has to be trusted to stop it. What it prints goes to the file
// log. It is recorded in the ledger right after the fork; a run's vfleet
// killed in between takes it along through the parent-death signal, which
// fires when the forking thread exits: a thread nsthread returns lives
// until the process ends. The daemon is returned, for the caller to stop,
// whenever it was started, even with an error.
func startDaemon(sides Sides, name, log string, cmd *exec.Cmd) (*daemon, error) {
	d := &daemon{name: name, cmd: cmd, log: log}
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// The policy guest.Env.ProcAttr has for guests. A run's daemons lead
	// their own process group, so a terminal's Ctrl-C reaches vfleet alone,
	// which then stops them in order, and die with vfleet. A fleet's
	// network outlives the vfleet that built it: its daemons get a session
	// of their own instead, and go when the fleet's ledger is undone.
	if sides.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := sides.Host.do(cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	gone, markGone := context.WithCancel(context.Background())
	d.gone = gone
	go func() { _ = cmd.Wait(); markGone() }()
	if d.entry, err = sides.Ledger.RecordProcess(cmd.Process.Pid); err != nil {
		return d, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// stop asks the daemon to exit, and kills it if it has not within
// daemonStopTimeout. os.Process signals no process it has reaped, so a
// pid the kernel has given to another process since is never hit.
func (d *daemon) stop(led *ledger.Ledger) error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(daemonStopTimeout)
	defer timer.Stop()
	select {
	case <-d.gone.Done():
	case <-timer.C:
		_ = d.cmd.Process.Kill()
		<-d.gone.Done()
	}
	if d.entry.Kind == "" {
		// Never recorded: nothing to mark done.
		return nil
	}
	return led.Done(d.entry)
}
