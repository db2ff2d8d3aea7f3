package guest

import "syscall"

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
