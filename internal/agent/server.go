package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server answers requests. It is used by vfleet-agent inside guests and, in
// tests, in-process.
type Server struct {
	Hello Hello
	// DefaultDir is the working directory of executed processes whose
	// request names none.
	DefaultDir string
	// KillGrace is how long a timed-out process group gets between SIGTERM
	// and SIGKILL.
	KillGrace time.Duration
}

// NewServer returns a server that introduces itself with the current
// process's identity.
func NewServer(agentVersion string) *Server {
	host, _ := os.Hostname()
	return &Server{
		Hello: Hello{
			V:            Version,
			AgentVersion: agentVersion,
			PID:          os.Getpid(),
			Hostname:     host,
			KernelUptime: readUptime(),
		},
		KillGrace: 2 * time.Second,
	}
}

func readUptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Serve accepts connections until ctx ends or the listener fails, serving
// each on its own goroutine so that several host-side clients (a barrier, a
// background load) can drive one guest at once.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			_ = s.ServeConn(ctx, conn)
		}()
	}
}

// ServeConn speaks the protocol on one stream until the peer closes it.
func (s *Server) ServeConn(ctx context.Context, rw io.ReadWriter) error {
	enc := json.NewEncoder(rw)
	if err := enc.Encode(s.Hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	// Lines are read on their own goroutine so that a client that hangs up
	// mid-request is noticed at once: its work is stopped rather than left
	// running until its timeout (a background load, an interrupted run).
	connCtx, hangUp := context.WithCancelCause(ctx)
	defer hangUp(nil)
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(rw, 64<<10)
		for {
			line, err := readLine(r)
			if err != nil {
				readErr <- err
				hangUp(errClientGone)
				return
			}
			select {
			case lines <- line:
			case <-connCtx.Done():
				return
			}
		}
	}()
	for {
		var line []byte
		select {
		case line = <-lines:
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-connCtx.Done():
			return nil
		}
		reply := s.handle(connCtx, line)
		if err := enc.Encode(reply); err != nil {
			return fmt.Errorf("send reply: %w", err)
		}
	}
}

var errClientGone = errors.New("client hung up")

// maxRequest bounds one request line; a request is argv and env, so
// anything larger is garbage or hostile.
const maxRequest = 1 << 20

func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxRequest {
			// Drain the rest of the oversized line so the stream stays in sync.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return []byte{}, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(bytes.TrimSpace(buf)) > 0 && errors.Is(err, io.EOF) {
				return buf, nil
			}
			return nil, err
		}
		return buf, nil
	}
}

func (s *Server) handle(ctx context.Context, line []byte) Reply {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Reply{V: Version, Error: fmt.Sprintf("malformed request: %v", err)}
	}
	reply := Reply{V: Version, ID: req.ID}
	if req.V != Version {
		reply.Error = fmt.Sprintf("protocol version %d not supported (agent speaks %d)", req.V, Version)
		return reply
	}
	switch req.Op {
	case OpPing:
		reply.AgentUnixNS = time.Now().UnixNano()
		return reply
	case OpExec, "":
		return s.exec(ctx, req)
	default:
		reply.Error = fmt.Sprintf("unknown op %q (known: %s, %s)", req.Op, OpExec, OpPing)
		return reply
	}
}

// limitedBuffer keeps the first limit bytes and notes that more came.
type limitedBuffer struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - b.buf.Len()
	if room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (s *Server) exec(ctx context.Context, req Request) Reply {
	reply := Reply{V: Version, ID: req.ID}
	if len(req.Argv) == 0 {
		reply.Error = "exec: empty argv"
		return reply
	}
	if req.TimeoutMS < 0 {
		reply.Error = "exec: negative timeout"
		return reply
	}
	if req.MaxOutput < 0 || req.MaxOutput > MaxOutputLimit {
		reply.Error = fmt.Sprintf("exec: max_output %d: want 0 (default %d) to %d bytes", req.MaxOutput, MaxOutput, MaxOutputLimit)
		return reply
	}
	limit := int(req.MaxOutput)
	if limit == 0 {
		limit = MaxOutput
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	if cmd.Env == nil {
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}
	}
	cmd.Dir = req.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.DefaultDir
	}
	// Its own process group, so a timeout kills the tool's children too;
	// and killed with the agent, so a long-running server (the network
	// peer's) never outlives the guest that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, stderr := limitedBuffer{limit: limit}, limitedBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	if req.StartAtUnixNS != 0 {
		wait := time.Until(time.Unix(0, req.StartAtUnixNS))
		if wait > MaxStartDelay {
			reply.Error = fmt.Sprintf("exec: start %s ahead, more than the %s allowed (are the clocks apart?)", wait.Round(time.Millisecond), MaxStartDelay)
			return reply
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				reply.Error = stopReason(ctx)
				return reply
			}
		}
	}
	start := time.Now()
	reply.StartedUnixNS = start.UnixNano()
	if err := cmd.Start(); err != nil {
		reply.Error = fmt.Sprintf("exec %s: %v", req.Argv[0], err)
		return reply
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timeout:
		reply.TimedOut = true
		waitErr = s.killGroup(cmd.Process.Pid, done)
	case <-ctx.Done():
		waitErr = s.killGroup(cmd.Process.Pid, done)
		reply.Error = stopReason(ctx)
	}
	reply.WallNS = time.Since(start).Nanoseconds()
	reply.EndedUnixNS = start.UnixNano() + reply.WallNS
	reply.Stdout, reply.Stderr = stdout.buf.Bytes(), stderr.buf.Bytes()
	reply.Truncated = stdout.truncated || stderr.truncated
	fillStatus(&reply, cmd.ProcessState, waitErr)
	return reply
}

func stopReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errClientGone) {
		return "stopped: the client hung up"
	}
	return "agent shutting down"
}

func (s *Server) killGroup(pid int, done <-chan error) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(s.KillGrace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return <-done
}

func fillStatus(reply *Reply, ps *os.ProcessState, waitErr error) {
	if ps == nil {
		if waitErr != nil && reply.Error == "" {
			reply.Error = waitErr.Error()
		}
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			reply.Signal = ws.Signal().String()
			reply.ExitCode = -1
		} else {
			reply.ExitCode = ws.ExitStatus()
		}
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		reply.Rusage = Rusage{
			UserNS:     ru.Utime.Nano(),
			SysNS:      ru.Stime.Nano(),
			MaxRSSKiB:  ru.Maxrss,
			VolCtxSw:   ru.Nvcsw,
			InvolCtxSw: ru.Nivcsw,
		}
	}
}
