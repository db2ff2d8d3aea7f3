package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// monitor is how vfleet drives a running virtual machine monitor. QMP is
// QEMU's; another VMM (Firecracker, Cloud Hypervisor) would implement the
// same few methods over its own API socket.
type monitor interface {
	// VCPUThreads returns the host thread id of each vCPU, by index.
	VCPUThreads(ctx context.Context) ([]int, error)
	// Powerdown asks the guest to power itself off, as a power button does.
	Powerdown(ctx context.Context) error
	// Quit ends the VMM at once, without the guest's cooperation.
	Quit(ctx context.Context) error
	Close() error
}

// qmpClient speaks QMP, QEMU's JSON monitor protocol: a greeting, then
// capability negotiation, then one reply per command, with asynchronous
// events interleaved. Commands are serialised.
type qmpClient struct {
	conn net.Conn
	r    *bufio.Reader
	mu   sync.Mutex
	id   int
}

var _ monitor = (*qmpClient)(nil)

// QMPError is an error QEMU returned for a command.
type QMPError struct {
	Command, Class, Desc string
}

func (e *QMPError) Error() string {
	return fmt.Sprintf("qmp %s: %s: %s", e.Command, e.Class, e.Desc)
}

// dialQMP connects and negotiates capabilities.
func dialQMP(ctx context.Context, path string) (*qmpClient, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dial qmp: %w", err)
	}
	q := &qmpClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	stop := watchConn(ctx, conn)
	line, err := q.r.ReadBytes('\n')
	stop()
	if err == nil {
		err = checkGreeting(line)
	}
	if err == nil {
		err = q.execute(ctx, "qmp_capabilities", nil, nil)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp handshake: %w", err)
	}
	return q, nil
}

func checkGreeting(line []byte) error {
	var g struct {
		QMP *struct {
			Version struct {
				QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
			} `json:"version"`
		} `json:"QMP"`
	}
	if err := json.Unmarshal(line, &g); err != nil || g.QMP == nil {
		return fmt.Errorf("not a QMP greeting: %.200q", line)
	}
	return nil
}

// execute runs one command; out, when not nil, receives its return value.
func (q *qmpClient) execute(ctx context.Context, command string, args any, out any) error {
	return q.executeWithFile(ctx, command, args, out, nil)
}

// executeWithFile runs one command, passing f's descriptor along with it
// when f is not nil, as getfd and add-fd take theirs.
func (q *qmpClient) executeWithFile(ctx context.Context, command string, args any, out any, f *os.File) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.id++
	id := strconv.Itoa(q.id)
	msg := map[string]any{"execute": command, "id": id}
	if args != nil {
		msg["arguments"] = args
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	stop := watchConn(ctx, q.conn)
	defer stop()
	if err := q.write(append(b, '\n'), f); err != nil {
		return fmt.Errorf("qmp %s: %w", command, ctxOr(ctx, err))
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("qmp %s: %w", command, ctxOr(ctx, err))
		}
		ret, done, err := decodeReply(line, command, id)
		if !done {
			continue
		}
		if err != nil {
			return err
		}
		if out != nil {
			if err := json.Unmarshal(ret, out); err != nil {
				return fmt.Errorf("qmp %s: decode reply: %w", command, err)
			}
		}
		return nil
	}
}

func (q *qmpClient) write(b []byte, f *os.File) error {
	if f == nil {
		_, err := q.conn.Write(b)
		return err
	}
	uc, ok := q.conn.(*net.UnixConn)
	if !ok {
		return errors.New("passing a descriptor needs a unix socket")
	}
	_, _, err := uc.WriteMsgUnix(b, unix.UnixRights(int(f.Fd())), nil)
	return err
}

// decodeReply reads one line from QEMU; done is false for an event or a
// reply to another command id, which the caller skips.
func decodeReply(line []byte, command, id string) (ret json.RawMessage, done bool, err error) {
	var m struct {
		Event  string          `json:"event"`
		ID     *string         `json:"id"`
		Return json.RawMessage `json:"return"`
		Error  *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, true, fmt.Errorf("qmp %s: malformed message %.200q: %w", command, line, err)
	}
	if m.Event != "" || (m.ID != nil && *m.ID != id) {
		return nil, false, nil
	}
	if m.Error != nil {
		return nil, true, &QMPError{Command: command, Class: m.Error.Class, Desc: m.Error.Desc}
	}
	if m.Return == nil {
		return nil, true, fmt.Errorf("qmp %s: reply without return or error: %.200q", command, line)
	}
	return m.Return, true, nil
}

func (q *qmpClient) VCPUThreads(ctx context.Context) ([]int, error) {
	var raw json.RawMessage
	if err := q.execute(ctx, "query-cpus-fast", nil, &raw); err != nil {
		return nil, err
	}
	return parseCPUsFast(raw)
}

// parseCPUsFast reads query-cpus-fast's return value into thread ids by
// vCPU index.
func parseCPUsFast(raw json.RawMessage) ([]int, error) {
	var cpus []struct {
		Index  int `json:"cpu-index"`
		Thread int `json:"thread-id"`
	}
	if err := json.Unmarshal(raw, &cpus); err != nil {
		return nil, fmt.Errorf("query-cpus-fast: %w", err)
	}
	threads := make([]int, len(cpus))
	for _, c := range cpus {
		if c.Index < 0 || c.Index >= len(cpus) || c.Thread <= 0 {
			return nil, fmt.Errorf("query-cpus-fast: unexpected vCPU %d thread %d", c.Index, c.Thread)
		}
		threads[c.Index] = c.Thread
	}
	return threads, nil
}

func (q *qmpClient) Powerdown(ctx context.Context) error {
	return q.execute(ctx, "system_powerdown", nil, nil)
}

// Quit asks QEMU to exit. QEMU may close the socket before its reply
// arrives; that, too, means it is going.
func (q *qmpClient) Quit(ctx context.Context) error {
	err := q.execute(ctx, "quit", nil, nil)
	var qe *QMPError
	if err != nil && !errors.As(err, &qe) && ctx.Err() == nil {
		return nil
	}
	return err
}

func (q *qmpClient) Close() error { return q.conn.Close() }

// watchConn makes blocking I/O on conn return when ctx ends; call the
// returned stop before the next use.
func watchConn(ctx context.Context, conn net.Conn) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-ctx.Done():
			_ = conn.SetDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = conn.SetDeadline(time.Time{})
	}
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
