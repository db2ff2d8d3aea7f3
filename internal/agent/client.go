package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Client is the host's end of one connection to an agent. It is safe for
// concurrent use: requests from several goroutines share the connection,
// and each gets its own reply, matched by id.
type Client struct {
	conn  net.Conn
	r     *bufio.Reader
	hello Hello

	wmu sync.Mutex // one request line at a time

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan Reply
	// broken is why the stream can no longer be used (closed, a failed or
	// garbled read or write); every request after it fails at once.
	broken error
}

// Dial connects to an agent's unix socket and checks its hello.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	return dialWith(ctx, UnixDialer(socketPath))
}

// Dialer opens a stream to an agent: its unix socket here, or one on
// another machine reached through a connection to it.
type Dialer func(context.Context) (net.Conn, error)

// UnixDialer dials the agent's unix socket at socketPath.
func UnixDialer(socketPath string) Dialer {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socketPath)
	}
}

func dialWith(ctx context.Context, dial Dialer) (*Client, error) {
	conn, err := dial(ctx)
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
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), pending: map[uint64]chan Reply{}}
	line, err := c.readHello(ctx)
	if err != nil {
		return nil, fmt.Errorf("read agent hello: %w", ctxErr(ctx, err))
	}
	if err := json.Unmarshal(line, &c.hello); err != nil {
		return nil, fmt.Errorf("read agent hello: %w", err)
	}
	if c.hello.V != Version {
		return nil, fmt.Errorf("%w: agent speaks %d, vfleet speaks %d (rebuild the image or vfleet)", ErrVersion, c.hello.V, Version)
	}
	go c.readReplies()
	return c, nil
}

// helloAsk is how long a client waits for the Hello an agent sends
// unasked before it asks for one (OpHello). An agent that sent it too, a
// VM's still booting, answers twice; the second Hello, with no request id,
// is dropped as a reply nobody waits for.
const helloAsk = time.Second

// readHello reads the agent's Hello, asking for it after helloAsk.
func (c *Client) readHello(ctx context.Context) ([]byte, error) {
	askCtx, cancel := context.WithTimeout(ctx, helloAsk)
	stop := watch(askCtx, c.conn.SetReadDeadline)
	first, err := c.r.ReadBytes('\n')
	stop()
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return first, err
	}
	if err := c.send(ctx, Request{V: Version, Op: OpHello}); err != nil {
		return nil, fmt.Errorf("ask for the hello: %w", err)
	}
	stop = watch(ctx, c.conn.SetReadDeadline)
	rest, err := c.r.ReadBytes('\n')
	stop()
	return append(first, rest...), err
}

// readReplies hands each reply to the request waiting for it until the
// stream ends. A reply nobody waits for answers a request given up on (or
// a cancel) and is dropped.
func (c *Client) readReplies() {
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			c.fail(fmt.Errorf("read reply: %w", err))
			return
		}
		var reply Reply
		if err := json.Unmarshal(line, &reply); err != nil {
			c.fail(fmt.Errorf("read reply: %w", err))
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[reply.ID]
		delete(c.pending, reply.ID)
		c.mu.Unlock()
		if ok {
			ch <- reply
		}
	}
}

// fail marks the stream unusable and fails every request waiting on it.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
	}
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
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
	return WaitReadyWith(ctx, UnixDialer(socketPath))
}

// WaitReadyWith is WaitReady over the streams dial opens.
func WaitReadyWith(ctx context.Context, dial Dialer) (*Client, error) {
	delay := readyFastDelay
	for attempt := 1; ; attempt++ {
		c, err := dialWith(ctx, dial)
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
// is returned together with an error wrapping ErrRemote. When ctx ends
// first, the agent is asked to stop the execution and Do returns at once;
// the connection stays usable.
func (c *Client) Do(ctx context.Context, req Request) (Reply, error) {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	if c.broken != nil {
		err := c.broken
		c.mu.Unlock()
		return Reply{}, fmt.Errorf("connection unusable: %w", err)
	}
	c.nextID++
	req.V, req.ID = Version, c.nextID
	c.pending[req.ID] = ch
	c.mu.Unlock()
	if req.Op == "" {
		req.Op = OpExec
	}
	if err := c.send(ctx, req); err != nil {
		c.forget(req.ID)
		return Reply{}, fmt.Errorf("send request: %w", err)
	}
	select {
	case reply, ok := <-ch:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			return Reply{}, c.broken
		}
		if reply.Error != "" {
			return reply, fmt.Errorf("%w: %s", ErrRemote, reply.Error)
		}
		return reply, nil
	case <-ctx.Done():
		c.forget(req.ID)
		if req.Op == OpExec {
			c.cancel(req.ID)
		}
		return Reply{}, ctx.Err()
	}
}

// cancel asks the agent to stop an execution, without waiting: its reply,
// and the cancel's own, are dropped when they come.
func (c *Client) cancel(id uint64) {
	c.mu.Lock()
	c.nextID++
	req := Request{V: Version, ID: c.nextID, Op: OpCancel, Target: id}
	c.mu.Unlock()
	ctx, done := context.WithTimeout(context.Background(), cancelSendTimeout)
	defer done()
	_ = c.send(ctx, req)
}

// cancelSendTimeout bounds the write of a cancel: an agent that does not
// read any more cannot be helped by waiting.
const cancelSendTimeout = 5 * time.Second

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// send writes one request line whole. A write cut short leaves half a line
// on the stream, after which nothing the agent reads is trustworthy.
func (c *Client) send(ctx context.Context, req Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	stop := watch(ctx, c.conn.SetWriteDeadline)
	defer stop()
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		err = ctxErr(ctx, err)
		c.fail(fmt.Errorf("send request: %w", err))
		return err
	}
	return nil
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, Request{Op: OpPing})
	return err
}

// Close closes the connection; the agent keeps running, and stops what it
// was running for this client.
func (c *Client) Close() error {
	c.fail(errors.New("connection closed"))
	return c.conn.Close()
}

// watch makes blocking I/O through setDeadline return when ctx ends. The
// returned stop must be called before the next such I/O.
func watch(ctx context.Context, setDeadline func(time.Time) error) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-ctx.Done():
			_ = setDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = setDeadline(time.Time{})
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
