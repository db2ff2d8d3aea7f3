package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
)

// Exec runs argv in the pod's container through the API server and
// returns its standard input and output as one connection: what the host
// writes is the program's input, what it prints is read. Closing the
// connection closes the program's input and ends the stream; a program
// that exits closes the connection. What the program says on standard
// error is kept for the error of a stream that failed.
func (c *Cluster) Exec(ctx context.Context, namespace, pod, container string, argv []string) (*ExecConn, error) {
	req := c.core.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdin: true, Stdout: true, Stderr: true}, params)
	// As kubectl does: WebSocket first, SPDY from an API server that
	// cannot upgrade to it.
	ws, err := remotecommand.NewWebSocketExecutor(c.config, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, c.wrap("exec in "+namespace+"/"+pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.config, http.MethodPost, req.URL())
	if err != nil {
		return nil, c.wrap("exec in "+namespace+"/"+pod, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, c.wrap("exec in "+namespace+"/"+pod, err)
	}

	// The caller's end is one half of an in-memory pipe, which has the
	// deadlines a connection needs; the other half feeds the stream.
	local, remote := net.Pipe()
	stdinR, stdinW := io.Pipe()
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	conn := &ExecConn{Conn: local, cancel: cancel, done: make(chan struct{})}
	go func() {
		_, err := io.Copy(stdinW, remote)
		stdinW.CloseWithError(err)
	}()
	go func() {
		defer close(conn.done)
		err := exec.StreamWithContext(streamCtx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: remote, Stderr: &conn.stderr})
		if err != nil {
			conn.setErr(fmt.Errorf("kubernetes %s: exec in %s/%s: %w: %s", c.Server, namespace, pod, err, bytes.TrimSpace(conn.stderr.Bytes())))
		}
		remote.Close()
		stdinR.Close()
	}()
	return conn, nil
}

// ExecConn is the caller's end of an exec's stream, a connection.
type ExecConn struct {
	net.Conn
	cancel context.CancelFunc
	done   chan struct{}
	stderr syncBuffer

	mu  sync.Mutex
	err error
}

func (e *ExecConn) setErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

// Err is why the stream failed, once it has ended; nil for a program
// that ran to its end.
func (e *ExecConn) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// closeWait bounds the wait for a program whose input was closed to end
// its stream; the stream is then cut.
const closeWait = 5 * time.Second

// Close ends the program's input, and waits for the program to end its
// stream (vfleet's agent ends its session when its input does) or cuts
// it, so that nothing of it outlives the connection.
func (e *ExecConn) Close() error {
	err := e.Conn.Close()
	select {
	case <-e.done:
	case <-time.After(closeWait):
	}
	e.cancel()
	<-e.done
	return err
}

// syncBuffer is a bytes.Buffer the stream writes while an error reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		return len(p), nil // enough to say why; the rest is dropped
	}
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
