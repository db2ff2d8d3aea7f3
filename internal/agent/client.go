package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Client is the host's end of one connection to an agent. Requests on one
// client are serialised; open several clients to run things concurrently.
type Client struct {
	conn  net.Conn
	r     *bufio.Reader
	hello Hello

	mu     sync.Mutex
	nextID uint64
	// broken is set when a request was abandoned mid-way: its reply may
	// still arrive, so the stream can no longer be trusted to be in step.
	broken error
}

// Dial connects to an agent's unix socket and checks its hello.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("dial agent: %w", err)
	}
	c, err := NewClient(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// NewClient speaks the protocol over an established connection; it reads
// the agent's hello first.
func NewClient(ctx context.Context, conn net.Conn) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	stop := c.watch(ctx)
	line, err := c.r.ReadBytes('\n')
	stop()
	if err != nil {
		return nil, fmt.Errorf("read agent hello: %w", ctxErr(ctx, err))
	}
	if err := json.Unmarshal(line, &c.hello); err != nil {
		return nil, fmt.Errorf("read agent hello: %w", err)
	}
	if c.hello.V != Version {
		return nil, fmt.Errorf("%w: agent speaks %d, vfleet speaks %d (rebuild the image or vfleet)", ErrVersion, c.hello.V, Version)
	}
	return c, nil
}

// Polling schedule of WaitReady: a container's agent listens a few
// milliseconds after its runtime returns, so the first readyFastPolls
// dials are readyFastDelay apart (a refused dial costs microseconds, a late
// one delays the whole start); a guest that takes longer, a VM booting, is
// then dialled ever less often, up to every readyMaxDelay.
const (
	readyFastDelay = time.Millisecond
	readyFastPolls = 30
	readyMaxDelay  = 100 * time.Millisecond
)

// WaitReady dials until the agent answers or ctx ends. A guest's agent
// socket appears some time after the guest starts, so refusals are retried.
func WaitReady(ctx context.Context, socketPath string) (*Client, error) {
	delay := readyFastDelay
	for attempt := 1; ; attempt++ {
		c, err := Dial(ctx, socketPath)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrVersion) {
			return nil, err
		}
		if attempt >= readyFastPolls {
			delay = min(2*delay, readyMaxDelay)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

// Hello is what the agent said when the connection opened.
func (c *Client) Hello() Hello { return c.hello }

// Do sends one request and waits for its reply. A reply whose Error is set
// is returned together with an error wrapping ErrRemote.
func (c *Client) Do(ctx context.Context, req Request) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return Reply{}, fmt.Errorf("connection unusable after an earlier abandoned request: %w", c.broken)
	}
	c.nextID++
	req.V, req.ID = Version, c.nextID
	if req.Op == "" {
		req.Op = OpExec
	}
	stop := c.watch(ctx)
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		c.broken = ctxErr(ctx, err)
		return Reply{}, fmt.Errorf("send request: %w", c.broken)
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		c.broken = ctxErr(ctx, err)
		return Reply{}, fmt.Errorf("read reply: %w", c.broken)
	}
	var reply Reply
	if err := json.Unmarshal(line, &reply); err != nil {
		return Reply{}, fmt.Errorf("read reply: %w", err)
	}
	if reply.ID != req.ID {
		return reply, fmt.Errorf("reply for request %d, expected %d", reply.ID, req.ID)
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("%w: %s", ErrRemote, reply.Error)
	}
	return reply, nil
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, Request{Op: OpPing})
	return err
}

// Close closes the connection; the agent keeps running.
func (c *Client) Close() error { return c.conn.Close() }

// watch makes blocking I/O on the connection return when ctx ends. The
// returned stop must be called before the next use of the connection.
func (c *Client) watch(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-ctx.Done():
			_ = c.conn.SetDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = c.conn.SetDeadline(time.Time{})
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
