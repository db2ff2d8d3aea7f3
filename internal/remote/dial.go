package remote

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

var (
	// ErrHostKeyUnknown says the peer's host key is in no known_hosts entry
	// for its address.
	ErrHostKeyUnknown = errors.New("host key unknown")
	// ErrHostKeyChanged says known_hosts holds other keys for the address,
	// or marks the peer's as revoked.
	ErrHostKeyChanged = errors.New("host key changed")
	// ErrNoCredentials says there is neither an SSH agent nor an identity.
	ErrNoCredentials = errors.New("no SSH credentials")
	// ErrAuth says the peer accepted none of the keys offered.
	ErrAuth = errors.New("authentication refused")
)

// Config says how to reach a peer. Nothing in it is a secret: keys stay in
// their file or in the SSH agent, and are read only to sign.
type Config struct {
	// KnownHosts is the known_hosts file the host key is checked against;
	// empty is ~/.ssh/known_hosts.
	KnownHosts string
	// Identity is a private key file without passphrase; empty offers the
	// agent's keys only.
	Identity string
	// AgentSocket is the SSH agent's socket; empty is SSH_AUTH_SOCK, and
	// with neither no agent is asked.
	AgentSocket string
	// Fingerprint, when set, is the host key's SHA256 fingerprint the
	// peer must also present: what a run recorded, for `vfleet clean`.
	Fingerprint string
	// Timeout bounds the connection and the handshake; 0 is 15 seconds.
	Timeout time.Duration
}

func (c Config) knownHosts() (string, error) {
	if c.KnownHosts != "" {
		return c.KnownHosts, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find known_hosts: %w", err)
	}
	return filepath.Join(home, ".ssh", "known_hosts"), nil
}

// Dial connects to the peer and authenticates, with its host key checked
// first. It never asks for a password: vfleet runs unattended.
func Dial(ctx context.Context, t Target, cfg Config) (*Machine, error) {
	file, err := cfg.knownHosts()
	if err != nil {
		return nil, err
	}
	// Absolute, so that `vfleet clean`, run from elsewhere, finds the same
	// files in the ledger.
	if cfg.KnownHosts, err = filepath.Abs(file); err != nil {
		return nil, fmt.Errorf("known hosts: %w", err)
	}
	if cfg.Identity != "" {
		if cfg.Identity, err = filepath.Abs(cfg.Identity); err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
	}
	check, err := hostKeyChecker(file)
	if err != nil {
		return nil, err
	}
	auth, closeAgent, err := authMethod(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	defer closeAgent()

	var presented ssh.PublicKey
	var hostKeyErr error
	config := &ssh.ClientConfig{
		User: t.User,
		Auth: []ssh.AuthMethod{auth},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			presented = key
			hostKeyErr = checkHostKey(check, file, t, remote, key)
			if hostKeyErr == nil && cfg.Fingerprint != "" && ssh.FingerprintSHA256(key) != cfg.Fingerprint {
				hostKeyErr = fmt.Errorf("%w: %s presents %s, the run recorded %s: it is not the machine the run used", ErrHostKeyChanged, t, ssh.FingerprintSHA256(key), cfg.Fingerprint)
			}
			return hostKeyErr
		},
		// Ask for the kinds of key known_hosts holds, so a peer with
		// several does not present one nobody recorded.
		HostKeyAlgorithms: knownAlgorithms(check, t),
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout())
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", t.Addr())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t, err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	c, chans, reqs, err := ssh.NewClientConn(conn, t.Addr(), config)
	stop()
	if err != nil {
		conn.Close()
		switch {
		case hostKeyErr != nil:
			// Said in full already, without the library's prefix.
			return nil, hostKeyErr
		case ctx.Err() != nil:
			return nil, fmt.Errorf("ssh handshake with %s: %w", t, ctx.Err())
		case presented != nil:
			// The host key passed: what failed is the login.
			return nil, fmt.Errorf("%w by %s: %v; add the public key (of %s) to %s's ~/.ssh/authorized_keys", ErrAuth, t, err, offered(cfg), t.User)
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", t, err)
	}
	conn.SetDeadline(time.Time{})
	return &Machine{Target: t, HostKey: ssh.FingerprintSHA256(presented), cfg: cfg, client: ssh.NewClient(c, chans, reqs),
		sessions: make(chan struct{}, maxSessions)}, nil
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 15 * time.Second
}

func offered(cfg Config) string {
	var what []string
	if cfg.agentSocket() != "" {
		what = append(what, "a key of the SSH agent")
	}
	if cfg.Identity != "" {
		what = append(what, cfg.Identity)
	}
	return strings.Join(what, " or ")
}

func (c Config) agentSocket() string {
	if c.AgentSocket != "" {
		return c.AgentSocket
	}
	return os.Getenv("SSH_AUTH_SOCK")
}

// hostKeyChecker reads known_hosts; a file that does not exist knows no
// host, which the check then says how to fix.
func hostKeyChecker(file string) (ssh.HostKeyCallback, error) {
	// knownhosts opens the file itself: it is checked first, so that a
	// named pipe or a device is refused rather than read.
	if err := CheckKnownHosts(file); err != nil {
		return nil, err
	}
	check, err := knownhosts.New(file)
	if errors.Is(err, os.ErrNotExist) {
		return func(string, net.Addr, ssh.PublicKey) error { return &knownhosts.KeyError{} }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKnownHosts, err)
	}
	return check, nil
}

// checkHostKey turns knownhosts' verdict into one that says what the key
// is and what to do.
func checkHostKey(check ssh.HostKeyCallback, file string, t Target, remote net.Addr, key ssh.PublicKey) error {
	err := check(t.Addr(), remote, key)
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	fp := ssh.FingerprintSHA256(key)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &revoked):
		return fmt.Errorf("%w: %s presents the %s key %s, which %s:%d marks revoked", ErrHostKeyChanged, t, key.Type(), fp, revoked.Revoked.Filename, revoked.Revoked.Line)
	case errors.As(err, &keyErr) && len(keyErr.Want) == 0:
		return fmt.Errorf("%w: %s presents the %s key %s, which %s does not hold; if that is the peer's key, accept it with: %s",
			ErrHostKeyUnknown, t, key.Type(), fp, file, acceptCommand(file, t))
	case errors.As(err, &keyErr):
		var known []string
		for _, k := range keyErr.Want {
			known = append(known, fmt.Sprintf("%s %s at %s:%d", k.Key.Type(), ssh.FingerprintSHA256(k.Key), k.Filename, k.Line))
		}
		return fmt.Errorf("%w: %s presents the %s key %s, but known hosts hold %s; if the peer was really reinstalled, forget the old key with: ssh-keygen -f %s -R %s, then accept the new one",
			ErrHostKeyChanged, t, key.Type(), fp, strings.Join(known, ", "), shellWord(file), shellWord(knownhosts.Normalize(t.Addr())))
	}
	return fmt.Errorf("check host key of %s: %w", t, err)
}

// acceptCommand is the ssh command that accepts t's host key into file:
// a line users paste into a shell, every word of it quoted, since the
// user and the file name are not vfleet's (a user of $(id) must not run
// id).
func acceptCommand(file string, t Target) string {
	return fmt.Sprintf("ssh -o StrictHostKeyChecking=accept-new -o %s -p %d %s true",
		shellWord("UserKnownHostsFile="+file), t.Port, shellWord(t.User+"@"+t.Host))
}

// shellWord quotes s for a shell where it needs it: a known_hosts address
// ("[HOST]:PORT", where brackets would be a pattern), a user, a path.
// Words of only safe characters are left bare, for a readable hint.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return singleQuoted(s)
}

// singleQuoted is s as one word of a POSIX shell, whatever it holds.
func singleQuoted(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// knownAlgorithms lists the host key algorithms of the keys known_hosts
// holds for t; when it holds none, OpenSSH's own order, so that the key
// whose fingerprint an error shows is the one `ssh` would then accept.
func knownAlgorithms(check ssh.HostKeyCallback, t Target) []string {
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var keyErr *knownhosts.KeyError
	if !errors.As(check(t.Addr(), &net.TCPAddr{IP: net.IPv4zero}, probe), &keyErr) || len(keyErr.Want) == 0 {
		return []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	var algs []string
	for _, k := range keyErr.Want {
		switch k.Key.Type() {
		case ssh.KeyAlgoRSA:
			// An RSA key signs with SHA-2 today; ssh-rsa (SHA-1) last.
			algs = append(algs, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algs = append(algs, k.Key.Type())
		}
	}
	return algs
}

// authMethod offers the agent's keys and the identity file's, in that
// order, in one method so that a peer's limit on attempts counts them once.
func authMethod(cfg Config) (ssh.AuthMethod, func(), error) {
	var signers []ssh.Signer
	if cfg.Identity != "" {
		raw, err := readIdentity(cfg.Identity)
		if err != nil {
			return nil, nil, err
		}
		s, err := ssh.ParsePrivateKey(raw)
		var protected *ssh.PassphraseMissingError
		if errors.As(err, &protected) {
			return nil, nil, fmt.Errorf("%w: %s has a passphrase, which vfleet never asks for: add it to your SSH agent (ssh-add %s) and give no identity", ErrIdentity, cfg.Identity, cfg.Identity)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrIdentity, cfg.Identity, err)
		}
		signers = append(signers, s)
	}
	var agentConn net.Conn
	if sock := cfg.agentSocket(); sock != "" {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return nil, nil, fmt.Errorf("SSH agent at %s: %w", sock, err)
		}
		agentConn = c
	}
	closeAgent := func() {
		if agentConn != nil {
			agentConn.Close()
		}
	}
	if agentConn == nil && len(signers) == 0 {
		return nil, nil, fmt.Errorf("%w: no SSH agent (SSH_AUTH_SOCK is not set) and no identity file", ErrNoCredentials)
	}
	return ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		out := signers
		if agentConn != nil {
			fromAgent, err := agent.NewClient(agentConn).Signers()
			if err != nil {
				return nil, fmt.Errorf("SSH agent: %w", err)
			}
			out = append(fromAgent, signers...)
		}
		return out, nil
	}), closeAgent, nil
}
