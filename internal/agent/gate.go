package agent

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// StartGatePath is where an image built by vfleet has its start gate, the
// library whose constructor holds a preloaded tool until the agent lets it
// go (internal/image/native/src/start-gate.c).
const StartGatePath = "/usr/local/lib/vfleet/start-gate.so"

// The gate's side of the exchange: it says ready, sleeps until the moment
// on the kernel's clock, and answers with the realtime clock, in
// nanoseconds, at which it first ran after waking and how long before
// that it waited for a CPU (-1 unknown), each a little-endian int64.
const (
	gateFDEnv     = "VFLEET_GATE_FD"
	gateAtEnv     = "VFLEET_GATE_AT"
	gateReady     = 'r'
	gateFD        = 3 // the first of cmd.ExtraFiles
	gateAnswerLen = 16
)

// gateAnswerWait bounds how long past the moment the agent waits for the
// gate to say it let the tool go; past it the tool is taken as let go at
// the moment.
const gateAnswerWait = 2 * time.Second

// gate is a started tool held before its main.
type gate struct {
	conn    *net.UnixConn
	toolEnd *os.File // the tool's end, held by the agent until the tool has it
	ready   chan error
	answer  chan gateAnswer
}

// gateAnswer is when the gate let its tool go: when the kernel woke it,
// and when it first ran, a scheduler's turn later where CPUs are short.
type gateAnswer struct {
	released, ran time.Time
	err           error
}

// gateable says whether the tool cmd runs can be held by the gate at lib:
// a dynamically linked executable of the library's machine, in an
// environment with no preload of its own. A static tool would ignore the
// preload and start at once, so anything else is started at the moment.
func gateable(cmd *exec.Cmd, lib string) bool {
	if lib == "" || cmd.Err != nil {
		return false
	}
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, gateFDEnv+"=") || strings.HasPrefix(kv, gateAtEnv+"=") {
			return false
		}
	}
	libMachine, libOK := elfMachine(lib, false)
	toolMachine, toolOK := elfMachine(cmd.Path, true)
	return libOK && toolOK && libMachine == toolMachine
}

// elfMachine is the machine of an ELF file; needInterp also asks that it
// be dynamically linked.
func elfMachine(path string, needInterp bool) (elf.Machine, bool) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if needInterp {
		dynamic := false
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		if !dynamic {
			return 0, false
		}
	}
	return f.Machine, true
}

// attachGate arranges for cmd to load the gate at lib, connected to the
// agent by a socket pair, to be let go at moment.
func attachGate(cmd *exec.Cmd, lib string, moment time.Time) (*gate, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start gate: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "gate")
	defer ours.Close()
	c, err := net.FileConn(ours)
	if err != nil {
		syscall.Close(fds[1])
		return nil, fmt.Errorf("start gate: %w", err)
	}
	g := &gate{conn: c.(*net.UnixConn), toolEnd: os.NewFile(uintptr(fds[1]), "gate-tool"),
		ready: make(chan error, 1), answer: make(chan gateAnswer, 1)}
	cmd.ExtraFiles = []*os.File{g.toolEnd}
	cmd.Env = append(cmd.Env, "LD_PRELOAD="+lib, fmt.Sprintf("%s=%d", gateFDEnv, gateFD), fmt.Sprintf("%s=%d", gateAtEnv, moment.UnixNano()))
	return g, nil
}

// started gives up the tool's end, which the tool now holds, and listens
// for the gate: ready, then its answer at the moment.
func (g *gate) started() {
	g.toolEnd.Close()
	go func() {
		var b [1 + gateAnswerLen]byte
		if _, err := io.ReadFull(g.conn, b[:1]); err != nil {
			g.ready <- err
			return
		}
		if b[0] != gateReady {
			g.ready <- fmt.Errorf("start gate said %q, not ready", b[0])
			return
		}
		g.ready <- nil
		var a gateAnswer
		if _, a.err = io.ReadFull(g.conn, b[1:]); a.err == nil {
			a.ran = time.Unix(0, int64(binary.LittleEndian.Uint64(b[1:9])))
			a.released = a.ran
			if waited := int64(binary.LittleEndian.Uint64(b[9:])); waited > 0 {
				a.released = a.ran.Add(-time.Duration(waited))
			}
		}
		g.answer <- a
	}()
}

func (g *gate) close() {
	g.toolEnd.Close()
	g.conn.Close()
}

// errToolExited says the held tool ended before its start gate was ready:
// it could not load.
var errToolExited = errors.New("the tool ended before its start gate was ready")

// hold waits for the gate to be ready and then for its answer at the
// moment. It returns errToolExited when the process ends before it is
// ready, and the context's error when the context ends first; a gate that
// stays silent past the moment is taken as having let its tool go then.
func (g *gate) hold(ctx context.Context, moment time.Time, exited <-chan struct{}) (gateAnswer, error) {
	select {
	case err := <-g.ready:
		if err != nil {
			return gateAnswer{}, fmt.Errorf("start gate: %w", err)
		}
	case <-exited:
		return gateAnswer{}, errToolExited
	case <-ctx.Done():
		return gateAnswer{}, ctx.Err()
	}
	late := time.NewTimer(time.Until(moment) + gateAnswerWait)
	defer late.Stop()
	select {
	case a := <-g.answer:
		if a.err == nil {
			// The kernel's timer lets no tool go before the moment; an
			// earlier figure is a wait for a CPU before the gate slept.
			if a.released.Before(moment) {
				a.released = moment
			}
			return a, nil
		}
	case <-exited:
	case <-late.C:
	case <-ctx.Done():
		return gateAnswer{}, ctx.Err()
	}
	return gateAnswer{released: moment, ran: moment}, nil
}

// sleepUntil returns at moment, at once if it is past, or with the
// context's error.
func sleepUntil(ctx context.Context, moment time.Time) error {
	wait := time.Until(moment)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
