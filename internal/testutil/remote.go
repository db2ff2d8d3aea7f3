package testutil

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	netnsx "github.com/vishvananda/netns"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/procfs"
)

// Remote is another machine for tests of vfleet's remote peer: a network
// namespace of its own running OpenSSH's sshd, reached from this one over
// a management veth pair, with a second veth pair whose end here plays the
// dedicated NIC a lab wires to its peer. Its file system is this machine's.
type Remote struct {
	// URL is how vfleet names it: ssh://root@ADDRESS:22.
	URL  string
	User string
	// Addr is sshd's address and port, on the management link.
	Addr netip.AddrPort
	// Identity is a private key file (no passphrase) that sshd accepts.
	Identity string
	// AgentSocket is an SSH agent holding the same key (SSH_AUTH_SOCK).
	AgentSocket string
	// KnownHosts is a known_hosts file holding sshd's host key.
	KnownHosts string
	// HostKey is sshd's ed25519 host key, the one KnownHosts holds. sshd
	// has an ECDSA key too, as Debian's has, which no file knows: a client
	// must ask for the kind of key it knows.
	HostKey ssh.PublicKey
	// WorkDir is the remote sessions' TMPDIR: what a remote peer makes
	// with mktemp lands here, so a test can see it removed.
	WorkDir string
	// NetNS is the namespace's path (/run/netns/NAME).
	NetNS string
	// Management is the link sshd is reached over; NIC the dedicated one.
	Management, NIC RemoteLink
}

// RemoteLink is a veth pair between this machine's namespace and the
// remote's, each end with its address in a /30.
type RemoteLink struct {
	Name, PeerName string // this end's interface, the remote's
	Addr, PeerAddr netip.Prefix
}

// The fixture's addresses: one /30 of each block per fixture, chosen at
// random so that tests running at once (each its own fixture) rarely meet;
// the link names, which carry the same index, settle a collision.
var (
	remoteManagement = netip.MustParsePrefix("198.19.252.0/22")
	remoteNIC        = netip.MustParsePrefix("198.19.248.0/22")
)

// remoteSlots is how many /30s each block holds.
const remoteSlots = 256

// RemoteOption changes the remote machine a test gets.
type RemoteOption func(*remoteOptions)

type remoteOptions struct{ path string }

// RemotePATH gives the remote's sessions this PATH instead of sshd's
// default: a machine that lacks programs this one has.
func RemotePATH(path string) RemoteOption {
	return func(o *remoteOptions) { o.path = path }
}

// RemoteMachine starts a remote machine for the test and removes it, with
// every process inside it, when the test ends.
func RemoteMachine(t testing.TB, opts ...RemoteOption) *Remote {
	t.Helper()
	RequiresRoot(t)
	RequiresTool(t, "sshd", "openssh-server")
	sshd, _ := exec.LookPath("sshd")
	dir := t.TempDir()
	// Short, unlike a test's temporary directory, which is named after
	// the test: a Unix socket's path in it must fit in 108 bytes.
	work, err := os.MkdirTemp("", "vfr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	r := &Remote{User: "root", WorkDir: work}
	var o remoteOptions
	for _, opt := range opts {
		opt(&o)
	}

	r.HostKey = signerOf(t, writeKey(t, filepath.Join(dir, "ssh_host_ed25519_key"))).PublicKey()
	ecdsaKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	writePrivate(t, filepath.Join(dir, "ssh_host_ecdsa_key"), ecdsaKey)
	r.Identity = filepath.Join(dir, "id_ed25519")
	user := writeKey(t, r.Identity)
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(signerOf(t, user).PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	r.AgentSocket = ServeSSHAgent(t, filepath.Join(dir, "agent.sock"), user)

	slot := makeRemoteLinks(t, r)
	r.Addr = netip.AddrPortFrom(r.Management.PeerAddr.Addr(), 22)
	r.URL = "ssh://" + r.User + "@" + r.Addr.String()
	r.KnownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(r.Addr.String())}, r.HostKey)
	if err := os.WriteFile(r.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// sshd checks for its privilege separation directory at start; the
	// package's service makes it, which nothing runs here.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(config, []byte(sshdConfig(r, dir, authorized, o)), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &strings.Builder{}
	cmd := exec.Command(sshd, "-D", "-e", "-f", config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nsthread.DoPath(r.NetNS, cmd.Start); err != nil {
		t.Fatalf("start sshd in the remote machine: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		// What sessions started (a remote peer's agent, sshd's own
		// per-connection processes) lives in the namespace and outlives
		// sshd: everything there goes with the machine.
		killIn(t, r.NetNS)
		if t.Failed() && log.Len() > 0 {
			t.Logf("sshd of remote machine %d:\n%s", slot, log)
		}
	})
	waitListening(t, r.Addr, exited, log)
	return r
}

func sshdConfig(r *Remote, dir, authorized string, o remoteOptions) string {
	env := "SetEnv TMPDIR=" + r.WorkDir
	if o.path != "" {
		// SetEnv overrides the PATH sshd gives sessions.
		env += " PATH=" + o.path
	}
	return strings.Join([]string{
		"ListenAddress " + r.Addr.String(),
		"HostKey " + filepath.Join(dir, "ssh_host_ed25519_key"),
		"HostKey " + filepath.Join(dir, "ssh_host_ecdsa_key"),
		"AuthorizedKeysFile " + authorized,
		"PidFile none",
		"UsePAM no",
		// The key files live in the test's temporary directory, whose
		// parents sshd would otherwise insist root alone can write.
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"AllowStreamLocalForwarding yes",
		env,
		"LogLevel ERROR",
	}, "\n") + "\n"
}

// writeKey makes an ed25519 key and writes it, OpenSSH's private key
// format, to path; ssh-keygen would take a process for the same.
func writeKey(t testing.TB, path string) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	writePrivate(t, path, priv)
	return priv
}

func writePrivate(t testing.TB, path string, key crypto.PrivateKey) {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "vfleet test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

func signerOf(t testing.TB, key ed25519.PrivateKey) ssh.Signer {
	t.Helper()
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// NewSSHKey writes a fresh private key file no remote machine accepts.
func NewSSHKey(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	writeKey(t, path)
	return path
}

// ServeSSHAgent serves an SSH agent holding keys (private keys as
// x/crypto/ssh parses them) on the socket sock, in this process, until
// the test ends, and returns sock.
func ServeSSHAgent(t testing.TB, sock string, keys ...any) string {
	t.Helper()
	keyring := agent.NewKeyring()
	for _, key := range keys {
		if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	return sock
}

// makeRemoteLinks makes the namespace and its two veth pairs in a free
// slot and returns the slot.
func makeRemoteLinks(t testing.TB, r *Remote) int {
	t.Helper()
	for range 8 {
		n, err := rand.Int(rand.Reader, big.NewInt(remoteSlots))
		if err != nil {
			t.Fatal(err)
		}
		slot := int(n.Int64())
		err = makeRemoteSlot(t, r, slot)
		if err == nil {
			return slot
		}
		if !errors.Is(err, unix.EEXIST) {
			t.Fatalf("remote machine: %v", err)
		}
	}
	t.Fatal("remote machine: no free slot after 8 tries")
	return 0
}

func makeRemoteSlot(t testing.TB, r *Remote, slot int) error {
	name := "vfremote-" + strconv.Itoa(slot)
	r.Management = slotLink(remoteManagement, slot, "vfrm"+strconv.Itoa(slot), "eth0")
	r.NIC = slotLink(remoteNIC, slot, "vfrn"+strconv.Itoa(slot), "eth1")
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		return fmt.Errorf("namespace %s: %w", name, unix.EEXIST)
	}
	err := nsthread.Do(netnsx.None(), func() error {
		h, err := netnsx.NewNamed(name)
		if err != nil {
			return err
		}
		return h.Close()
	})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	r.NetNS = filepath.Join("/run/netns", name)
	t.Cleanup(func() {
		if err := netnsx.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remote machine: delete namespace %s: %v", name, err)
		}
	})
	ns, err := netnsx.GetFromPath(r.NetNS)
	if err != nil {
		return err
	}
	defer ns.Close()
	inside, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer inside.Close()
	here, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	defer here.Close()
	if err := up(inside, "lo"); err != nil {
		return err
	}
	for _, l := range []RemoteLink{r.Management, r.NIC} {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.Name}, PeerName: l.PeerName, PeerNamespace: netlink.NsFd(ns)}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("link %s: %w", l.Name, err)
		}
		// Deleting the namespace takes the pair with it; this end is
		// deleted first all the same, so no test sees it linger.
		t.Cleanup(func() { netlink.LinkDel(veth) })
		if err := addressUp(here, l.Name, l.Addr); err != nil {
			return err
		}
		if err := addressUp(inside, l.PeerName, l.PeerAddr); err != nil {
			return err
		}
	}
	// The NIC's far end behaves as a wire does: it delivers frames with
	// their checksums done, where a veth's end leaves them partial and an
	// XDP program on the NIC redirects a frame as it came; and GRO gives
	// it NAPI, without which this end could not transmit a redirected XDP
	// frame, as a NIC's native driver can. Without this the xdp path over
	// the NIC loses the peer's frames.
	if out, err := exec.Command("nsenter", "--net="+r.NetNS, "ethtool", "-K", r.NIC.PeerName, "tx", "off", "gro", "on").CombinedOutput(); err != nil {
		return fmt.Errorf("ethtool on the NIC's far end: %w: %s", err, out)
	}
	return nil
}

// slotLink is the pair of a slot in block: this end the /30's first
// address, the remote's its second.
func slotLink(block netip.Prefix, slot int, name, peerName string) RemoteLink {
	base := block.Addr().As4()
	off := slot * 4
	base[2] += byte(off >> 8)
	base[3] += byte(off)
	first := netip.AddrFrom4(base).Next()
	return RemoteLink{Name: name, PeerName: peerName,
		Addr: netip.PrefixFrom(first, 30), PeerAddr: netip.PrefixFrom(first.Next(), 30)}
}

func up(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	return h.LinkSetUp(l)
}

func addressUp(h *netlink.Handle, name string, addr netip.Prefix) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	ipnet := &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("address %s on %s: %w", addr, name, err)
	}
	return h.LinkSetUp(l)
}

// waitListening waits, bounded, until sshd accepts connections.
func waitListening(t testing.TB, addr netip.AddrPort, exited <-chan struct{}, log *strings.Builder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr.String())
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("sshd of the remote machine exited: %s", log)
		case <-ctx.Done():
			t.Fatalf("sshd of the remote machine not listening on %s: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RunningInNetNS lists the processes running (zombies aside) whose network
// namespace is the one at nsPath.
func RunningInNetNS(nsPath string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(nsPath, &want); err != nil {
		return nil, err
	}
	var pids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil || st.Ino != want.Ino || st.Dev != want.Dev {
			continue
		}
		if ps, err := procfs.ReadStat(pid); err == nil && ps.Running() {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killIn kills every process whose network namespace is the one at path,
// until none is left.
func killIn(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := RunningInNetNS(path)
		if err != nil || len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		if time.Now().After(deadline) {
			t.Errorf("remote machine: %d processes still running in %s", len(pids), path)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
