package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startServer serves on a unix socket in a temp dir and returns its path.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerWith(t, func(*Server) {})
}

// startServerWith serves with a server that configure changed.
func startServerWith(t *testing.T, configure func(*Server)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := NewServer("test")
	srv.KillGrace = 200 * time.Millisecond
	configure(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return sock
}

func dial(t *testing.T, sock string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestExecReportsOutputStatusAndUsage(t *testing.T) {
	c := dial(t, startServer(t))
	if c.Hello().V != Version || c.Hello().AgentVersion != "test" {
		t.Fatalf("hello = %+v", c.Hello())
	}
	r, err := c.Do(context.Background(), Request{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.ExitCode != 3 || r.Succeeded() {
		t.Fatalf("reply = %+v", r)
	}
	if r.WallNS <= 0 {
		t.Errorf("wall time not measured: %d", r.WallNS)
	}
	// A CPU-busy child must show up in rusage.
	r, err = c.Do(context.Background(), Request{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("busy loop: %v %+v", err, r)
	}
	if r.Rusage.UserNS+r.Rusage.SysNS <= 0 || r.Rusage.MaxRSSKiB <= 0 {
		t.Errorf("rusage not filled: %+v", r.Rusage)
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	c := dial(t, startServer(t))
	marker := filepath.Join(t.TempDir(), "child-survived")
	// The child ignores SIGTERM; only the group SIGKILL stops it.
	script := "trap '' TERM; (trap '' TERM; sleep 2; touch " + marker + ") & sleep 30"
	start := time.Now()
	r, err := c.Do(context.Background(), Request{Argv: []string{"sh", "-c", script}, TimeoutMS: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Succeeded() {
		t.Fatalf("want timed out, got %+v", r)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("timeout not enforced")
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a child of the timed-out process survived the kill")
	}
}

func TestBadRequestsGetErrorRepliesAndConnectionSurvives(t *testing.T) {
	sock := startServer(t)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil { // hello
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"{not json\n", "malformed request"},
		{`{"v":2,"id":6,"op":"cancel","target":77}` + "\n", "no execution 77 is running"},
		{`{"v":99,"id":1,"op":"ping"}` + "\n", "protocol version 99"},
		{`{"v":2,"id":2,"op":"reboot"}` + "\n", "unknown op"},
		{`{"v":2,"id":3,"op":"exec"}` + "\n", "empty argv"},
		{`{"v":2,"id":4,"op":"exec","argv":["/nonexistent/tool"]}` + "\n", "no such file"},
		{strings.Repeat("x", maxRequest+10) + "\n", "malformed request"},
		{`{"v":2,"id":5,"op":"ping"}` + "\n", ""},
	} {
		if _, err := conn.Write([]byte(tc.line)); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %.30q: %v", tc.line, err)
		}
		var reply Reply
		if err := json.Unmarshal(line, &reply); err != nil {
			t.Fatal(err)
		}
		if tc.want == "" && reply.Error != "" || !strings.Contains(reply.Error, tc.want) {
			t.Errorf("request %.30q: error %q, want %q", tc.line, reply.Error, tc.want)
		}
	}
}

// An operation the server adds runs in its process with the request's
// argument; its error comes back as the reply's, and unknown operations
// are named with it.
func TestServerOps(t *testing.T) {
	var got []string
	c := dial(t, startServerWith(t, func(s *Server) {
		s.Ops = map[string]func(context.Context, string) error{
			"become": func(_ context.Context, arg string) error {
				got = append(got, arg)
				if arg == "bad" {
					return errors.New("cannot")
				}
				return nil
			},
		}
	}))
	ctx := context.Background()
	if _, err := c.Do(ctx, Request{Op: "become", Arg: "me"}); err != nil || len(got) != 1 || got[0] != "me" {
		t.Fatalf("become me: %v, op saw %q", err, got)
	}
	if _, err := c.Do(ctx, Request{Op: "become", Arg: "bad"}); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "become: cannot") {
		t.Errorf("become bad: %v", err)
	}
	if _, err := c.Do(ctx, Request{Op: "reboot"}); err == nil || !strings.Contains(err.Error(), "known: exec, ping, cancel, lookpath, hello, become") {
		t.Errorf("unknown op: %v", err)
	}
}

// A process asked to stop after a while gets SIGINT, may print its
// summary, and its reply is a success that says it was stopped.
func TestStopAfterInterruptsAndKeepsOutput(t *testing.T) {
	c := dial(t, startServer(t))
	r, err := c.Do(context.Background(), Request{
		Argv:        []string{"sh", "-c", `trap 'echo summary; exit 3' INT; echo started; while :; do sleep 0.05; done`},
		StopAfterMS: 300, TimeoutMS: 10_000,
	})
	if err != nil || !r.Stopped || !r.Succeeded() || r.TimedOut || string(r.Stdout) != "started\nsummary\n" {
		t.Fatalf("stopped run: %v %+v", err, r)
	}
	if r.Wall() < 300*time.Millisecond || r.Wall() > 5*time.Second {
		t.Errorf("stopped after %s, asked 300ms", r.Wall())
	}
	// One that ends by itself first is not marked stopped.
	r, err = c.Do(context.Background(), Request{Argv: []string{"true"}, StopAfterMS: 10_000})
	if err != nil || r.Stopped || !r.Succeeded() {
		t.Errorf("quick run: %v %+v", err, r)
	}
}

// lookpath answers like `command -v`: the path, or exit status 1 when
// the program is not there.
func TestLookPath(t *testing.T) {
	c := dial(t, startServer(t))
	ctx := context.Background()
	r, err := c.Do(ctx, Request{Op: OpLookPath, Arg: "sh"})
	if err != nil || r.ExitCode != 0 || !strings.HasSuffix(string(r.Stdout), "/sh") {
		t.Errorf("lookpath sh: %v %+v", err, r)
	}
	r, err = c.Do(ctx, Request{Op: OpLookPath, Arg: "no-such-tool-here"})
	if err != nil || r.ExitCode != 1 || len(r.Stdout) != 0 {
		t.Errorf("lookpath of a missing tool: %v %+v", err, r)
	}
	if _, err := c.Do(ctx, Request{Op: OpLookPath}); !errors.Is(err, ErrRemote) {
		t.Errorf("lookpath of nothing: %v", err)
	}
}

func TestRemoteErrorIsClassified(t *testing.T) {
	c := dial(t, startServer(t))
	_, err := c.Do(context.Background(), Request{Argv: []string{"/nonexistent/tool"}})
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("err = %v, want ErrRemote", err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("connection unusable after a remote error: %v", err)
	}
}

func TestVersionMismatchRefusedAtHello(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		json.NewEncoder(b).Encode(Hello{V: Version + 1})
		b.Close()
	}()
	_, err := NewClient(context.Background(), a)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("err = %v, want ErrVersion", err)
	}
}

// A request given up on is stopped in the guest, and the connection
// carries on: a VM has only the one.
func TestCancelledRequestIsStoppedAndConnectionStaysUsable(t *testing.T) {
	c := dial(t, startServer(t))
	marker := filepath.Join(t.TempDir(), "still-running")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Do(ctx, Request{Argv: []string{"sh", "-c", "sleep 1; touch " + marker}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("connection unusable after a cancelled request: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the cancelled process ran on")
	}
}

// Executions on one connection overlap: the first ends only once the
// second, sent after it, has run.
func TestExecutionsOnOneConnectionRunConcurrently(t *testing.T) {
	c := dial(t, startServer(t))
	flag := filepath.Join(t.TempDir(), "flag")
	waiter := make(chan error, 1)
	go func() {
		r, err := c.Do(context.Background(), Request{Argv: []string{"sh", "-c", "while [ ! -e " + flag + " ]; do sleep 0.01; done"}, TimeoutMS: 10000})
		if err == nil && !r.Succeeded() {
			err = errors.New("the waiting execution did not succeed: timed out or failed")
		}
		waiter <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if r, err := c.Do(context.Background(), Request{Argv: []string{"touch", flag}}); err != nil || !r.Succeeded() {
		t.Fatalf("touch: %v %+v", err, r)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

func TestWaitReadyWaitsForSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "late.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := WaitReady(ctx, sock); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestExecOutputLimitPerRequest(t *testing.T) {
	c := dial(t, startServer(t))
	const size = MaxOutput + 1<<20
	argv := []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}
	r, err := c.Do(context.Background(), Request{Argv: argv})
	if err != nil || len(r.Stdout) != MaxOutput || !r.Truncated || r.StdoutCut == nil || r.StdoutCut.Total != size || r.StderrCut != nil {
		t.Fatalf("default limit: err %v, %d bytes kept, truncated %v, cut %+v", err, len(r.Stdout), r.Truncated, r.StdoutCut)
	}
	r, err = c.Do(context.Background(), Request{Argv: argv, MaxOutput: 2 * MaxOutput})
	if err != nil || len(r.Stdout) != size || r.Truncated {
		t.Fatalf("raised limit: err %v, %d bytes kept, truncated %v", err, len(r.Stdout), r.Truncated)
	}
	for _, bad := range []int64{-1, MaxOutputLimit + 1} {
		if _, err := c.Do(context.Background(), Request{Argv: argv, MaxOutput: bad}); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "max_output") {
			t.Errorf("max_output %d: err = %v", bad, err)
		}
	}
}

// Each session's hello carries the hostname the guest has when it begins:
// a VM clone, resumed as a copy of its template's agent, takes its own
// name after the agent started.
func TestHelloCarriesTheCurrentHostname(t *testing.T) {
	var name atomic.Value
	name.Store("template")
	sock := startServerWith(t, func(s *Server) {
		s.hostname = func() (string, error) { return name.Load().(string), nil }
	})
	if got := dial(t, sock).Hello().Hostname; got != "template" {
		t.Fatalf("first hello: hostname %q", got)
	}
	name.Store("vm-7")
	if got := dial(t, sock).Hello().Hostname; got != "vm-7" {
		t.Fatalf("hello after the rename: hostname %q, want vm-7", got)
	}
}

// A session whose hello went elsewhere (a VM's serial port, where the
// guest did not see the last client leave before the next one came) or
// comes late: the client asks for the hello, and a second one, unasked,
// is dropped without breaking the session.
func TestClientAsksForAHelloThatDoesNotCome(t *testing.T) {
	for name, delay := range map[string]time.Duration{"lost": -1, "late": helloAsk + 500*time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Kernel sockets, buffered as a real stream is: with a
			// synchronous pipe the client's request and the late hello
			// would wait for each other.
			client, middle := socketPair(t)
			agentSide, server := socketPair(t)
			t.Cleanup(func() { client.Close(); middle.Close(); agentSide.Close(); server.Close() })
			go func() { _ = NewServer("test").ServeConn(ctx, server) }()
			// The agent's first line, its unasked hello, is dropped or held
			// back; everything after passes both ways.
			go func() {
				r := bufio.NewReader(agentSide)
				hello, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				if delay >= 0 {
					time.Sleep(delay)
					if _, err := middle.Write(hello); err != nil {
						return
					}
				}
				go func() { _, _ = io.Copy(agentSide, middle) }()
				_, _ = io.Copy(middle, r)
			}()
			c, err := NewClient(ctx, client)
			if err != nil {
				t.Fatalf("no hello: %v", err)
			}
			if c.Hello().V != Version {
				t.Errorf("hello %+v", c.Hello())
			}
			if _, err := c.Do(ctx, Request{Op: OpPing}); err != nil {
				t.Errorf("ping after the hello: %v", err)
			}
		})
	}
}
