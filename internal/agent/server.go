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
	"sort"
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
	// StartGate is the library that holds a tool started ahead of its
	// moment (StartGatePath in vfleet's images); where it is missing, or
	// empty, tools are started at the moment.
	StartGate string
	// Ops are operations beyond the protocol's own, done in the agent's
	// process and answered when done (a VM clone's taking on its
	// identity): cheaper than executing a program for them.
	Ops map[string]func(ctx context.Context, arg string) error
	// hostname, when set, gives each session's Hello the name the guest
	// has then: a VM clone takes its own after it resumes as a copy of
	// its template's agent.
	hostname func() (string, error)
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
		StartGate: StartGatePath,
		hostname:  os.Hostname,
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

// maxInFlight bounds the executions one connection may have running at
// once: a run needs a handful (a measured tool, its background load, a
// server), so more is a runaway client.
const maxInFlight = 64

// ServeConn speaks the protocol on one stream until the peer closes it.
// Executions run concurrently, each answered when it ends, so one stream
// (a VM's single virtio-serial port) carries a measured tool, its
// background load and a server at once; everything else is answered in
// order, at once. When the peer hangs up, its executions are stopped
// rather than left running until their timeouts (a background load, an
// interrupted run).
func (s *Server) ServeConn(ctx context.Context, rw io.ReadWriter) error {
	c := &conn{srv: s, enc: json.NewEncoder(rw), running: map[uint64]context.CancelCauseFunc{}}
	if err := c.send(s.hello()); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	connCtx, hangUp := context.WithCancelCause(ctx)
	defer func() {
		hangUp(errClientGone)
		c.inFlight.Wait()
	}()
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(rw, 64<<10)
		for {
			line, err := readLine(r)
			if err != nil {
				readErr <- err
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
		select {
		case line := <-lines:
			if err := c.dispatch(connCtx, line); err != nil {
				return fmt.Errorf("send reply: %w", err)
			}
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-connCtx.Done():
			return nil
		}
	}
}

// conn is one client's stream: replies are written whole, one at a time,
// and the executions running for it can be cancelled by id.
type conn struct {
	srv      *Server
	wmu      sync.Mutex
	enc      *json.Encoder
	inFlight sync.WaitGroup

	mu      sync.Mutex
	running map[uint64]context.CancelCauseFunc
	sendErr error
}

func (c *conn) send(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.enc.Encode(v)
}

// hello is the server's Hello with the name the guest has now.
func (s *Server) hello() Hello {
	h := s.Hello
	if s.hostname != nil {
		if name, err := s.hostname(); err == nil {
			h.Hostname = name
		}
	}
	return h
}

// dispatch answers a request at once, or starts its execution and answers
// when it ends. The error is a failed write of an immediate answer, or of
// an execution's answer that ended before.
func (c *conn) dispatch(ctx context.Context, line []byte) error {
	req, reply, ok := decode(line)
	if !ok {
		return c.send(reply)
	}
	switch req.Op {
	case OpHello:
		return c.send(c.srv.hello())
	case OpPing:
		reply.AgentUnixNS = time.Now().UnixNano()
	case OpCancel:
		c.mu.Lock()
		stop, running := c.running[req.Target]
		c.mu.Unlock()
		if !running {
			reply.Error = fmt.Sprintf("cancel: no execution %d is running", req.Target)
		} else {
			stop(errCancelled)
		}
	case OpLookPath:
		switch path, err := exec.LookPath(req.Arg); {
		case req.Arg == "":
			reply.Error = "lookpath: no program named"
		case err != nil:
			reply.ExitCode = 1
		default:
			reply.Stdout = []byte(path)
		}
	case OpExec, "":
		if err := c.start(ctx, req); err != "" {
			reply.Error = err
			break
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sendErr
	default:
		op, ok := c.srv.Ops[req.Op]
		if !ok {
			known := []string{OpExec, OpPing, OpCancel, OpLookPath, OpHello}
			builtin := len(known)
			for name := range c.srv.Ops {
				known = append(known, name)
			}
			sort.Strings(known[builtin:])
			reply.Error = fmt.Sprintf("unknown op %q (known: %s)", req.Op, strings.Join(known, ", "))
			break
		}
		if err := op(ctx, req.Arg); err != nil {
			reply.Error = fmt.Sprintf("%s: %v", req.Op, err)
		}
	}
	return c.send(reply)
}

// start runs an execution on its own goroutine; the string says why it
// could not start.
func (c *conn) start(ctx context.Context, req Request) string {
	if why := checkExec(req); why != "" {
		return why
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.running[req.ID]; dup {
		return fmt.Sprintf("exec: request id %d is already running", req.ID)
	}
	if len(c.running) >= maxInFlight {
		return fmt.Sprintf("exec: %d executions already running on this connection, the most allowed", maxInFlight)
	}
	reqCtx, stop := context.WithCancelCause(ctx)
	c.running[req.ID] = stop
	c.inFlight.Add(1)
	go func() {
		defer c.inFlight.Done()
		reply := c.srv.exec(reqCtx, req)
		c.mu.Lock()
		delete(c.running, req.ID)
		c.mu.Unlock()
		stop(nil)
		if err := c.send(reply); err != nil {
			c.mu.Lock()
			c.sendErr = err
			c.mu.Unlock()
		}
	}()
	return ""
}

var (
	errClientGone = errors.New("client hung up")
	errCancelled  = errors.New("cancelled by the client")
)

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

// decode reads a request; when it cannot be served (malformed, another
// protocol version) ok is false and reply says why.
func decode(line []byte) (req Request, reply Reply, ok bool) {
	if err := json.Unmarshal(line, &req); err != nil {
		return req, Reply{V: Version, Error: fmt.Sprintf("malformed request: %v", err)}, false
	}
	reply = Reply{V: Version, ID: req.ID}
	if req.V != Version {
		reply.Error = fmt.Sprintf("protocol version %d not supported (agent speaks %d)", req.V, Version)
		return req, reply, false
	}
	return req, reply, true
}

// checkExec says what is wrong with an execution request, before anything
// runs; such a request is answered at once, in order.
func checkExec(req Request) string {
	switch {
	case len(req.Argv) == 0:
		return "exec: empty argv"
	case req.TimeoutMS < 0 || req.StopAfterMS < 0:
		return "exec: negative timeout"
	case req.MaxOutput < 0 || req.MaxOutput > MaxOutputLimit:
		return fmt.Sprintf("exec: max_output %d: want 0 (default %d) to %d bytes", req.MaxOutput, MaxOutput, MaxOutputLimit)
	}
	return ""
}

// exec runs a request that passed checkExec.
func (s *Server) exec(ctx context.Context, req Request) Reply {
	reply := Reply{V: Version, ID: req.ID}
	limit := int(req.MaxOutput)
	if limit == 0 {
		limit = MaxOutput
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	// By default a tool gets the agent's own environment, which the guest
	// kind set up: a user's image brings its own PATH and variables.
	cmd.Env = req.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Dir = req.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.DefaultDir
	}
	// Its own process group, so a timeout kills the tool's children too;
	// and killed with the agent, so a long-running server (the network
	// peer's) never outlives the guest that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, stderr := newCutBuffer(limit), newCutBuffer(limit)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	var moment time.Time
	if req.StartAtUnixNS != 0 {
		moment = time.Unix(0, req.StartAtUnixNS)
		if wait := time.Until(moment); wait > MaxStartDelay {
			reply.Error = fmt.Sprintf("exec: start %s ahead, more than the %s allowed (are the clocks apart?)", wait.Round(time.Millisecond), MaxStartDelay)
			return reply
		}
	}
	start, ran, done, gated, err := s.launch(ctx, cmd, moment)
	if err != nil {
		reply.Error = err.Error()
		if ctx.Err() != nil {
			reply.Error = stopReason(ctx)
		}
		return reply
	}
	reply.Gated = gated
	reply.StartedUnixNS = start.UnixNano()
	reply.StartWaitNS = ran.Sub(start).Nanoseconds()

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var stopAt <-chan time.Time
	if req.StopAfterMS > 0 {
		t := time.NewTimer(time.Duration(req.StopAfterMS) * time.Millisecond)
		defer t.Stop()
		stopAt = t.C
	}
	var waitErr error
	select {
	case waitErr = <-done:
	case <-stopAt:
		reply.Stopped = true
		waitErr = s.interruptGroup(cmd.Process.Pid, done)
	case <-timeout:
		reply.TimedOut = true
		waitErr = s.killGroup(cmd.Process.Pid, done)
	case <-ctx.Done():
		waitErr = s.killGroup(cmd.Process.Pid, done)
		reply.Error = stopReason(ctx)
	}
	reply.WallNS = time.Since(start).Nanoseconds()
	reply.EndedUnixNS = start.UnixNano() + reply.WallNS
	reply.Stdout, reply.StdoutCut = stdout.result()
	reply.Stderr, reply.StderrCut = stderr.result()
	reply.Truncated = reply.StdoutCut != nil || reply.StderrCut != nil
	fillStatus(&reply, cmd.ProcessState, waitErr)
	return reply
}

// launch starts cmd at moment (at once when it is zero or past) and
// returns when the tool was let go, when it first ran (later only where
// it waited for a CPU), and the channel its end is reported on. A tool the
// start gate can hold is started beforehand and let go by the kernel at
// the moment, so what a start costs (fork, exec, loading, the agent's own
// wake-up) is paid before it; any other is started at the moment. When
// launch fails, nothing it started is left running.
func (s *Server) launch(ctx context.Context, cmd *exec.Cmd, moment time.Time) (start, ran time.Time, done <-chan error, gated bool, err error) {
	var g *gate
	if time.Until(moment) > 0 && gateable(cmd, s.StartGate) {
		if g, err = attachGate(cmd, s.StartGate, moment); err != nil {
			return start, ran, nil, false, err
		}
		defer g.close()
	} else if err := sleepUntil(ctx, moment); err != nil {
		return start, ran, nil, false, err
	}
	start = time.Now()
	if err := cmd.Start(); err != nil {
		return start, start, nil, false, fmt.Errorf("exec %s: %v", cmd.Args[0], err)
	}
	ended := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(exited)
		ended <- err
	}()
	if g == nil {
		return start, start, ended, false, nil
	}
	g.started()
	switch a, err := g.hold(ctx, moment, exited); {
	case err == nil:
		return a.released, a.ran, ended, true, nil
	case errors.Is(err, errToolExited):
		// It never reached the gate (it could not load); its end is its
		// result, from when it was started.
		return start, start, ended, false, nil
	default:
		_ = s.killGroup(cmd.Process.Pid, ended)
		return start, start, nil, false, err
	}
}

func stopReason(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errClientGone), errors.Is(cause, errCancelled):
		return "stopped: " + cause.Error()
	}
	return "agent shutting down"
}

// interruptGroup ends a process group the way Ctrl-C would, so a tool
// that prints its summary on SIGINT gets to print it.
func (s *Server) interruptGroup(pid int, done <-chan error) error {
	_ = syscall.Kill(-pid, syscall.SIGINT)
	select {
	case err := <-done:
		return err
	case <-time.After(s.KillGrace):
	}
	return s.killGroup(pid, done)
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
