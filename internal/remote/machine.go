package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/ledger"
)

// Machine is an SSH connection to a peer and, once StartAgent has run,
// vfleet's agent there. It is safe for concurrent use.
type Machine struct {
	Target Target
	// HostKey is the SHA256 fingerprint of the key the peer presented.
	HostKey string

	cfg    Config
	client *ssh.Client
	// sessions bounds the commands running at once: sshd refuses sessions
	// past its MaxSessions (OpenSSH's default 10), and the agent holds one.
	sessions chan struct{}

	mu      sync.Mutex
	arch    string
	workDir string
	session *ssh.Session   // the agent's
	led     *ledger.Ledger // set once the ledger holds the peer's entry
	entry   ledger.Entry
	started bool // StartAgent was called: one agent per machine
	wires   []wire
}

// maxSessions is how many commands a Machine runs at once, below
// OpenSSH's default MaxSessions of 10 with the agent's session and one
// to spare.
const maxSessions = 8

// ErrCommand classifies a command that ran on the peer and failed.
var ErrCommand = errors.New("command failed on the peer")

// ErrArch says the peer's architecture is one vfleet builds no agent for.
var ErrArch = errors.New("unsupported peer architecture")

// Run runs argv on the peer, each argument quoted for its POSIX shell,
// with stdin if not nil, and returns its standard output. A failure
// carries its standard error.
func (m *Machine) Run(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("run on the peer: no command")
	}
	select {
	case m.sessions <- struct{}{}:
		defer func() { <-m.sessions }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%s on %s: %w", argv[0], m.Target, ctx.Err())
	}
	s, err := m.client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh session on %s: %w", m.Target, err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = stdin, &stdout, &stderr
	if err := s.Start(quote(argv)); err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", argv[0], m.Target, err)
	}
	// Closing the session is all a client can do to a command that runs
	// too long: the peer's sshd hangs up on it.
	stop := context.AfterFunc(ctx, func() { s.Close() })
	err = s.Wait()
	if !stop() {
		return nil, fmt.Errorf("%s on %s: %w", argv[0], m.Target, ctx.Err())
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("%w: %s on %s: %v: %s", ErrCommand, argv[0], m.Target, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// sh runs a script of vfleet's own (never a user's string) with args as
// its positional parameters.
func (m *Machine) sh(ctx context.Context, stdin io.Reader, script string, args ...string) ([]byte, error) {
	return m.Run(ctx, stdin, append([]string{"sh", "-c", script, "sh"}, args...)...)
}

// quote makes argv one command line for the peer's shell.
func quote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = singleQuoted(a)
	}
	return strings.Join(q, " ")
}

// Upload writes a local file to path on the peer with the given mode, over
// a session's standard input.
func (m *Machine) Upload(ctx context.Context, local, path string, mode os.FileMode) error {
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	if _, err := m.sh(ctx, f, `umask 077 && cat > "$1" && chmod "$2" "$1"`, path, fmt.Sprintf("%o", mode.Perm())); err != nil {
		return fmt.Errorf("upload %s to %s: %w", local, m.Target, err)
	}
	return nil
}

// Arch is the peer's Debian architecture, asked of `uname -m` once.
func (m *Machine) Arch(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.arch != "" {
		return m.arch, nil
	}
	out, err := m.Run(ctx, nil, "uname", "-m")
	if err != nil {
		return "", err
	}
	arch, err := debianArch(strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.Target, err)
	}
	m.arch = arch
	return arch, nil
}

// debianArch names the kernel's machine as Debian and vfleet's agents do.
func debianArch(machine string) (string, error) {
	switch machine {
	case "x86_64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("%w %q (vfleet has agents for x86_64 and aarch64)", ErrArch, machine)
}

// KindPeer is the ledger entry of what vfleet starts on a peer. Its ID is
// the peer's URL; its data say how to reach it again (known_hosts file,
// identity file, host key fingerprint: no secret) and the token naming
// the work directory.
const KindPeer = "remote-peer"

func init() { ledger.RegisterUndo(KindPeer, undoPeer) }

// workPrefix starts the name of every work directory vfleet makes on a
// peer, in its TMPDIR; the token that follows is the run's.
const workPrefix = "vfleet-peer-"

// agentName and socketName are the agent's binary and control socket in
// the work directory, pidName the file its pid is written to.
const (
	agentName  = "vfleet-agent"
	socketName = "agent.sock"
	pidName    = "agent.pid"
)

// StartAgent records the peer's work in the ledger, makes a work directory
// there (mktemp -d in its TMPDIR), copies the agent for the peer's
// architecture into it (agentFor finds it) and starts it serving on a
// Unix socket in that directory, which Agent reaches through the SSH
// connection: nothing listens on the peer's network. On failure, what it
// made is removed (unless the peer could not be reached to remove it,
// which the ledger then keeps for `vfleet clean`); the connection stays
// for Close, or another try.
func (m *Machine) StartAgent(ctx context.Context, led *ledger.Ledger, agentFor func(arch string) (string, error)) (err error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("the peer's agent is started already")
	}
	m.started = true
	m.mu.Unlock()
	defer func() {
		// Once a failed start has undone its work, another may be tried.
		if err != nil {
			m.mu.Lock()
			m.started = m.led != nil
			m.mu.Unlock()
		}
	}()
	arch, err := m.Arch(ctx)
	if err != nil {
		return err
	}
	bin, err := agentFor(arch)
	if err != nil {
		return err
	}
	token := make([]byte, 8)
	rand.Read(token)
	data := m.reach()
	data["token"] = hex.EncodeToString(token)
	entry, err := led.Record(KindPeer, m.Target.String(), data)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.led, m.entry = led, entry
	m.mu.Unlock()
	defer func() {
		if err != nil {
			// The caller's context may be what ended the start.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			err = errors.Join(err, m.stopAgent(cctx))
		}
	}()

	out, err := m.sh(ctx, nil, `mktemp -d "${TMPDIR:-/tmp}/`+workPrefix+`$1.XXXXXX"`, entry.Data["token"])
	if err != nil {
		return fmt.Errorf("work directory on %s: %w", m.Target, err)
	}
	dir := strings.TrimSpace(string(out))
	if !path.IsAbs(dir) {
		return fmt.Errorf("work directory on %s: mktemp said %q", m.Target, dir)
	}
	if err := m.Upload(ctx, bin, path.Join(dir, agentName), 0o755); err != nil {
		return err
	}
	s, err := m.client.NewSession()
	if err != nil {
		return fmt.Errorf("ssh session on %s: %w", m.Target, err)
	}
	var stderr bytes.Buffer
	s.Stderr = &stderr
	// The shell writes its pid and becomes the agent: the pid is the
	// agent's, which the undo checks by its executable before killing.
	script := `echo $$ > "$1/` + pidName + `" && exec "$1/` + agentName + `" --listen "$1/` + socketName + `" --workdir "$1"`
	if err := s.Start(quote([]string{"sh", "-c", script, "sh", dir})); err != nil {
		s.Close()
		return fmt.Errorf("start the agent on %s: %w", m.Target, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.Wait() }()
	m.mu.Lock()
	m.workDir, m.session = dir, s
	m.mu.Unlock()
	return m.waitAgent(ctx, exited, &stderr)
}

// reach is how `vfleet clean` reaches the peer again, for its ledger
// entries: the files to dial with and the host key it must present.
func (m *Machine) reach() map[string]string {
	return map[string]string{"known_hosts": m.cfg.KnownHosts, "identity": m.cfg.Identity, "host_key": m.HostKey}
}

// redial reaches the peer of a ledger entry again, as reach recorded.
func redial(ctx context.Context, e ledger.Entry) (*Machine, error) {
	t, err := ParseURL(e.ID)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, t, Config{KnownHosts: e.Data["known_hosts"], Identity: e.Data["identity"], Fingerprint: e.Data["host_key"]})
}

// Addr is the peer's address this connection reached: the one whose
// route must not leave by the test NIC.
func (m *Machine) Addr() netip.Addr {
	if a, ok := m.client.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// WorkDir is the agent's work directory on the peer, "" before
// StartAgent.
func (m *Machine) WorkDir() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workDir
}

// ProbeWorkDir makes a work directory on the peer as StartAgent would and
// removes it at once, and says where it was: the check of `vfleet doctor
// --peer`, which starts nothing there.
func (m *Machine) ProbeWorkDir(ctx context.Context) (string, error) {
	out, err := m.sh(ctx, nil, `d=$(mktemp -d "${TMPDIR:-/tmp}/`+workPrefix+`probe.XXXXXX") && rmdir "$d" && echo "$d"`)
	if err != nil {
		return "", fmt.Errorf("work directory on %s: %w", m.Target, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// waitAgent waits, bounded, until the agent answers on its socket.
func (m *Machine) waitAgent(ctx context.Context, exited <-chan error, stderr *bytes.Buffer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := m.Agent(ctx)
		if err == nil {
			return c.Close()
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("the agent on %s exited: %v: %s", m.Target, werr, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			return fmt.Errorf("the agent on %s never answered: %w (last: %v)", m.Target, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Agent opens a new connection to the peer's agent, a channel of the SSH
// connection to its socket. Each call is a connection of its own.
func (m *Machine) Agent(ctx context.Context) (*agent.Client, error) {
	m.mu.Lock()
	dir := m.workDir
	m.mu.Unlock()
	if dir == "" {
		return nil, errors.New("the peer's agent is not started")
	}
	ch, err := m.DialUnix(ctx, path.Join(dir, socketName))
	if err != nil {
		return nil, fmt.Errorf("reach the agent on %s: %w", m.Target, err)
	}
	c, err := agent.NewClient(ctx, ch)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("agent on %s: %w", m.Target, err)
	}
	return c, nil
}

// DialUnix opens a stream to a unix socket on the peer: a channel of the
// SSH connection, with the deadlines a plain socket has.
func (m *Machine) DialUnix(ctx context.Context, socket string) (net.Conn, error) {
	ch, err := m.client.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	return withDeadlines(ch), nil
}

// withDeadlines gives an SSH channel, which has no deadlines, the ones
// the agent client sets to give up on a read or write, through a pipe.
func withDeadlines(ch net.Conn) net.Conn {
	mine, theirs := net.Pipe()
	go func() {
		io.Copy(theirs, ch)
		theirs.Close()
	}()
	go func() {
		io.Copy(ch, theirs)
		ch.Close()
	}()
	return mine
}

// cleanScript kills the agent of every work directory of a token (its pid
// file's process, if it still runs that directory's agent: a pid may be
// reused) and removes the directories. Its children die with it (the
// agent gives them a parent-death signal).
const cleanScript = `for d in "${TMPDIR:-/tmp}"/` + workPrefix + `"$1".*; do
  [ -d "$d" ] || continue
  if [ -f "$d/` + pidName + `" ]; then
    pid=$(cat "$d/` + pidName + `")
    if [ "$(readlink "/proc/$pid/exe")" = "$d/` + agentName + `" ]; then kill -KILL "$pid"; fi
  fi
  rm -rf -- "$d"
done`

// Close takes the wiring off the peer's NIC, stops the peer's agent,
// removes its work directory, marks the ledger entries done and hangs up.
// What could not be cleaned on the peer stays in the ledger for `vfleet
// clean`.
func (m *Machine) Close(ctx context.Context) error {
	err := errors.Join(m.unwire(ctx), m.stopAgent(ctx))
	if cerr := m.client.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = errors.Join(err, cerr)
	}
	return err
}

// stopAgent undoes what StartAgent made on the peer, if anything.
func (m *Machine) stopAgent(ctx context.Context) error {
	m.mu.Lock()
	entry, led, s := m.entry, m.led, m.session
	m.led, m.session, m.workDir = nil, nil, ""
	m.mu.Unlock()
	if led == nil {
		return nil
	}
	if s != nil {
		defer s.Close()
	}
	if _, err := m.sh(ctx, nil, cleanScript, entry.Data["token"]); err != nil {
		return fmt.Errorf("clean up %s: %w", m.Target, err)
	}
	return led.Done(entry)
}

// undoPeer reaches the peer again as the entry says, with the host key the
// run recorded, and removes what the run left there.
func undoPeer(ctx context.Context, e ledger.Entry) error {
	token := e.Data["token"]
	if _, err := hex.DecodeString(token); err != nil || token == "" {
		return fmt.Errorf("bad token %q in ledger entry for %s", token, e.ID)
	}
	m, err := redial(ctx, e)
	if err != nil {
		return err
	}
	defer m.client.Close()
	if _, err := m.sh(ctx, nil, cleanScript, token); err != nil {
		return fmt.Errorf("clean up %s: %w", m.Target, err)
	}
	return nil
}
