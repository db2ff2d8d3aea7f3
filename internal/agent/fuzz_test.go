package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// Bounds of one fuzz execution. A stream this short is answered in
// milliseconds; the timeout only turns a hang into a failure.
const (
	maxFuzzStream = 64 << 10
	fuzzTimeout   = 10 * time.Second
)

// FuzzServeConn feeds arbitrary bytes to the server as a client's request
// stream. Every line must be answered, in order (only executions, which
// run concurrently, are answered as they end, and none gets this far), and
// only a well-formed ping may be answered without an error.
//
// The server has no way to run a program other than for real, so an input
// with a line that decodes to a non-empty argv is skipped: it is the only
// way to an exec. Those inputs are decoded by the very json.Unmarshal into
// the very Request the server uses, so nothing the server would run gets
// through.
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"",
		"\n",
		"   \n\t\n",
		`{"v":2,"id":1,"op":"ping"}` + "\n",
		`{"v":2,"id":2,"op":"ping"}` + "\r\n" + `{"v":2,"id":3,"op":"ping"}`,
		`{"v":2,"id":4,"op":"ping"}` + "\n  ",
		`{"v":1,"id":5,"op":"ping"}` + "\n",
		`{"v":2,"id":11,"op":"cancel","target":11}` + "\n",
		`{"v":2,"id":6,"op":"reboot"}` + "\n",
		`{"v":2,"id":7,"op":"exec"}` + "\n" + `{"v":2,"id":8}` + "\n",
		`{"v":2,"id":9,"argv":[],"timeout_ms":-1}` + "\n",
		`{"v":2,"id":10,"argv":null,"start_at_unix_ns":9223372036854775807}` + "\n",
		`{"v":"1","id":-1}` + "\n",
		`{"v":2,"id":18446744073709551616}` + "\n",
		`{"v":2,"V":1,"Op":"ping","op":"exec"}` + "\n",
		"null\n[]\n\"ping\"\n{}\n{\n",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
		"\xff\xfe{\"v\":1}\n\x00\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzStream {
			t.Skip("longer than any request stream worth fuzzing")
		}
		lines := requestLines(in)
		for _, l := range lines {
			var req Request
			_ = json.Unmarshal(l, &req)
			if len(req.Argv) > 0 {
				t.Skip("would run a program")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
		defer cancel()
		srv := &Server{Hello: Hello{V: Version, AgentVersion: "fuzz", PID: 1, Hostname: "fuzz"}}
		var out bytes.Buffer
		if err := srv.ServeConn(ctx, struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), &out}); err != nil {
			t.Fatalf("ServeConn: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("the server took over %s to answer %d lines", fuzzTimeout, len(lines))
		}
		dec := json.NewDecoder(&out)
		var hello Hello
		if err := dec.Decode(&hello); err != nil || hello != srv.Hello {
			t.Fatalf("hello = %+v, %v; want %+v", hello, err, srv.Hello)
		}
		for i, l := range lines {
			var reply Reply
			if err := dec.Decode(&reply); err != nil {
				t.Fatalf("line %d %q: no reply: %v", i, l, err)
			}
			var req Request
			decoded := json.Unmarshal(l, &req) == nil
			ping := decoded && req.V == Version && req.Op == OpPing
			if ping == (reply.Error != "") || reply.V != Version || (decoded && reply.ID != req.ID) {
				t.Fatalf("line %d %q: reply %+v", i, l, reply)
			}
		}
		if err := dec.Decode(new(json.RawMessage)); !errors.Is(err, io.EOF) {
			t.Fatalf("after %d replies: %v, want the end of the stream", len(lines), err)
		}
	})
}

// requestLines splits a stream as ServeConn reads it: at each newline, and
// a last unterminated line unless it is blank.
func requestLines(in []byte) [][]byte {
	lines := bytes.SplitAfter(in, []byte("\n"))
	if last := lines[len(lines)-1]; len(bytes.TrimSpace(last)) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// FuzzClient has the client read a hello and replies from an arbitrary
// stream. Whatever arrives, the client must not panic, must accept only a
// hello of its own version, and may return a reply without an error only
// when it answers the request sent.
func FuzzClient(f *testing.F) {
	hello := `{"v":2,"agent_version":"x","pid":7,"hostname":"g","kernel_uptime_s":1.5}` + "\n"
	for _, s := range []string{
		"",
		hello,
		hello + `{"v":2,"id":1,"agent_unix_ns":1}` + "\n" + `{"v":2,"id":2}` + "\n",
		hello + `{"v":2,"id":2}` + "\n" + `{"v":2,"id":1}` + "\n",
		hello + `{"v":2,"id":1,"error":"boom"}` + "\n",
		hello + `{"v":2,"id":1,"stdout":"not base64"}` + "\n" + `{"v":2,"id":2,"stdout":"b2s="}` + "\n",
		hello + `{"v":2,"id":1`,
		hello + "\n\n\n",
		`{"v":1}` + "\n",
		`{"v":2,"pid":"x"}` + "\n",
		"{\"v\":1}\r\n{\"v\":1,\"id\":1}\r\n",
		"\x00\xff\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzStream {
			t.Skip("longer than any reply stream worth fuzzing")
		}
		near, far := socketPair(t)
		// The agent's side: everything at once, then the end of the stream,
		// while swallowing whatever the client sends.
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer far.Close()
			_, _ = far.Write(in)
			_ = far.CloseWrite()
			_, _ = io.Copy(io.Discard, far)
		}()
		defer func() {
			near.Close()
			<-done
		}()
		ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
		defer cancel()
		c, err := NewClient(ctx, near)
		if err != nil {
			return
		}
		if c.Hello().V != Version {
			t.Fatalf("accepted hello %+v", c.Hello())
		}
		for id := uint64(1); id <= uint64(bytes.Count(in, []byte("\n")))+1 && c.usable(); id++ {
			reply, err := c.Do(ctx, Request{Op: OpPing})
			if err == nil && (reply.ID != id || reply.Error != "") {
				t.Fatalf("request %d: accepted reply %+v", id, reply)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the client was still reading after %s", fuzzTimeout)
		}
	})
}

// socketPair connects two unix stream sockets, as the client and an agent
// are: unlike net.Pipe, one side can end its stream and still read.
func socketPair(t *testing.T) (near net.Conn, far *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		file := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(file)
		file.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return conns[0], conns[1].(*net.UnixConn)
}

// usable says whether the client still takes requests.
func (c *Client) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken == nil
}
