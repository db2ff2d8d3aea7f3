package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// TestRemoteMachine runs the SSH layer against the tests' remote machine,
// one machine for all its parts, and finds nothing of either left.
func TestRemoteMachine(t *testing.T) {
	testutil.RequiresRoot(t)
	// A developer's own agent must not answer for the test's keys.
	t.Setenv("SSH_AUTH_SOCK", "")
	before := testutil.TakeSnapshot(t)
	agentBin := testutil.BuildAgent(t)
	agentFor := func(arch string) (string, error) {
		if arch != image.HostArch {
			return "", fmt.Errorf("no %s agent in this test", arch)
		}
		return agentBin, nil
	}
	t.Run("machine", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		target, err := ParseURL(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		byIdentity := Config{KnownHosts: r.KnownHosts, Identity: r.Identity}
		t.Run("identity", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			if m.HostKey != ssh.FingerprintSHA256(r.HostKey) {
				t.Errorf("HostKey = %s, want %s", m.HostKey, ssh.FingerprintSHA256(r.HostKey))
			}
			out, err := m.Run(context.Background(), nil, "echo", "it's", "$HOME")
			if err != nil || string(out) != "it's $HOME\n" {
				t.Errorf("Run echo = %q, %v; want the arguments as given", out, err)
			}
		})
		t.Run("agent", func(t *testing.T) {
			dial(t, target, Config{KnownHosts: r.KnownHosts, AgentSocket: r.AgentSocket})
		})
		t.Run("unknown host key", func(t *testing.T) {
			for _, file := range []string{filepath.Join(t.TempDir(), "absent"), emptyFile(t)} {
				_, err := Dial(context.Background(), target, Config{KnownHosts: file, Identity: r.Identity})
				if !errors.Is(err, ErrHostKeyUnknown) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(r.HostKey)) || !strings.Contains(err.Error(), "StrictHostKeyChecking=accept-new") {
					t.Errorf("known_hosts without the peer: %v; want ErrHostKeyUnknown with the fingerprint and how to accept it", err)
				}
			}
		})
		t.Run("changed host key", func(t *testing.T) {
			other, err := ssh.ParsePrivateKey(mustRead(t, testutil.NewSSHKey(t)))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "known_hosts")
			line := knownhosts.Line([]string{knownhosts.Normalize(target.Addr())}, other.PublicKey())
			if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Dial(context.Background(), target, Config{KnownHosts: file, Identity: r.Identity})
			if !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(r.HostKey)) ||
				!strings.Contains(err.Error(), ssh.FingerprintSHA256(other.PublicKey())) || !strings.Contains(err.Error(), "ssh-keygen -f "+file+" -R") {
				t.Errorf("known_hosts with another key: %v; want ErrHostKeyChanged with both fingerprints and how to forget the old", err)
			}
			// What a run recorded must match as well as known_hosts.
			_, err = Dial(context.Background(), target, Config{KnownHosts: r.KnownHosts, Identity: r.Identity, Fingerprint: ssh.FingerprintSHA256(other.PublicKey())})
			if !errors.Is(err, ErrHostKeyChanged) {
				t.Errorf("host key other than the recorded one: %v; want ErrHostKeyChanged", err)
			}
		})
		t.Run("wrong key", func(t *testing.T) {
			_, err := Dial(context.Background(), target, Config{KnownHosts: r.KnownHosts, Identity: testutil.NewSSHKey(t)})
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "authorized_keys") {
				t.Errorf("a key the peer does not accept: %v; want ErrAuth saying where the key goes", err)
			}
		})
		t.Run("many commands at once", func(t *testing.T) {
			// More than sshd's sessions per connection (MaxSessions 10).
			m := dial(t, target, byIdentity)
			var wg sync.WaitGroup
			errs := make([]error, 20)
			for i := range errs {
				wg.Go(func() { _, errs[i] = m.Run(context.Background(), nil, "sleep", "0.2") })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Error(err)
			}
		})
		t.Run("stream, stopped by its input's end", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			ctx, cancel := context.WithCancel(context.Background())
			var stdout bytes.Buffer
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			// The command says it started, then waits for its input to end.
			go func() {
				b := make([]byte, 8)
				pr.Read(b)
				cancel()
			}()
			err = m.Stream(ctx, io.MultiWriter(&stdout, pw), nil, time.Minute, "sh", "-c", `echo started; cat > /dev/null; echo stopped; exit 130`)
			pw.Close()
			if status, ok := ExitStatus(err); !ok || status != 130 || !errors.Is(err, ErrCommand) {
				t.Errorf("Stream: %v; want the command's own exit status 130", err)
			}
			if stdout.String() != "started\nstopped\n" {
				t.Errorf("Stream's output %q; want what the command wrote before and after its input ended", stdout.String())
			}
		})
		t.Run("push", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			src := t.TempDir()
			if err := os.MkdirAll(filepath.Join(src, "tree", "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "tree", "d", "f"), []byte("data"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(src, "tree", "d", "f"), filepath.Join(src, "tree", "g")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(src, "tree", "d", "f"), 4242, 4343); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(r.WorkDir, "pushed")
			defer os.RemoveAll(dst)
			if err := m.Push(context.Background(), src, []string{"tree"}, dst); err != nil {
				t.Fatal(err)
			}
			f, err := os.Stat(filepath.Join(dst, "tree", "d", "f"))
			if err != nil {
				t.Fatal(err)
			}
			g, err := os.Stat(filepath.Join(dst, "tree", "g"))
			if err != nil {
				t.Fatal(err)
			}
			st := f.Sys().(*syscall.Stat_t)
			if !os.SameFile(f, g) || f.Mode().Perm() != 0o640 || st.Uid != 4242 || st.Gid != 4343 {
				t.Errorf("pushed file: mode %v, owner %d:%d, hard link kept %v; want 0640, 4242:4343, kept", f.Mode(), st.Uid, st.Gid, os.SameFile(f, g))
			}
		})
		t.Run("programs", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			absent := programs.Program{Name: "vfleet-test-absent-program", Package: "vfleet-test-absent-package"}
			found, err := m.CheckPrograms(context.Background(), []programs.Program{{Name: "sh", Package: "dash"}, absent})
			if !errors.Is(err, tools.ErrMissing) || !strings.Contains(err.Error(), absent.Name) || !strings.Contains(err.Error(), "Debian package "+absent.Package) {
				t.Errorf("CheckPrograms: %v; want the missing program named with its package", err)
			}
			if len(found) != 1 || found[0].Name != "sh" || found[0].Path == "" || found[0].Version == "" {
				t.Errorf("CheckPrograms found %+v; want sh with its path and dash's version", found)
			}
		})
		t.Run("fingerprint", func(t *testing.T) {
			testutil.RequiresTool(t, "ethtool", "ethtool")
			m := dial(t, target, byIdentity)
			fp, err := m.Fingerprint(context.Background(), r.NIC.PeerName, []Found{{Program: programs.Program{Name: "sh", Package: "dash"}, Version: "1"}})
			if err != nil {
				t.Fatal(err)
			}
			host, _ := os.Hostname()
			if fp.Hostname != host || fp.Kernel == "" || fp.CPUModel == "" || fp.MemTotalKiB == 0 || fp.OnlineCPUs == 0 || fp.ToolVersions["dash"] != "1" {
				t.Errorf("Fingerprint = %+v; want this machine's (its file system and kernel)", fp)
			}
			if fp.NIC == nil || fp.NIC.Name != r.NIC.PeerName || fp.NIC.Driver != "veth" || fp.NIC.Offloads["rx-checksumming"] == "" {
				t.Errorf("Fingerprint.NIC = %+v; want the dedicated link's veth with its offloads", fp.NIC)
			}
		})
		t.Run("agent started, two clients", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			led := newLedger(t)
			if err := m.StartAgent(context.Background(), led, agentFor); err != nil {
				t.Fatal(err)
			}
			if len(agentsIn(t, r.WorkDir)) != 1 || len(led.Pending()) != 1 {
				t.Fatalf("started: agents %v, ledger %v; want one of each", agentsIn(t, r.WorkDir), led.Pending())
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Go(func() {
					c, err := m.Agent(context.Background())
					if err != nil {
						errs[i] = err
						return
					}
					defer c.Close()
					// Both run at once: each sleeps, then answers.
					rep, err := c.Do(context.Background(), agent.Request{Op: agent.OpExec, Argv: []string{"sh", "-c", "sleep 0.3; echo $0", strconv.Itoa(i)}})
					if err == nil && string(rep.Stdout) != strconv.Itoa(i)+"\n" {
						err = fmt.Errorf("client %d: %+v", i, rep)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Error(err)
			}
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertClean(t, r.WorkDir, led)
		})
		t.Run("cancelled start", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			led := newLedger(t)
			if _, err := m.Arch(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			err := m.StartAgent(ctx, led, func(arch string) (string, error) {
				cancel()
				return agentFor(arch)
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("StartAgent cancelled: %v; want context.Canceled", err)
			}
			assertClean(t, r.WorkDir, led)
			// What failed was undone: the machine may start its agent again.
			if err := m.StartAgent(context.Background(), led, agentFor); err != nil {
				t.Fatalf("StartAgent after a cancelled one: %v", err)
			}
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertClean(t, r.WorkDir, led)
		})
		t.Run("abandoned, then cleaned", func(t *testing.T) {
			m := dial(t, target, byIdentity)
			root := t.TempDir()
			led, err := ledger.Create(root, "run")
			if err != nil {
				t.Fatal(err)
			}
			defer led.Close()
			if err := m.StartAgent(context.Background(), led, agentFor); err != nil {
				t.Fatal(err)
			}
			// As when vfleet is killed: the connection goes, nothing is undone.
			m.client.Close()
			time.Sleep(200 * time.Millisecond)
			if len(agentsIn(t, r.WorkDir)) != 1 {
				t.Fatalf("the abandoned agent: %v; want it still running, as after a SIGKILL", agentsIn(t, r.WorkDir))
			}
			removed, err := ledger.CleanRun(context.Background(), root, "run", ledger.CleanOptions{Force: true})
			if err != nil || len(removed) != 1 || removed[0].Err != nil {
				t.Fatalf("clean: %v, %+v", err, removed)
			}
			if left := testutil.Outliving(func() []int { return agentsIn(t, r.WorkDir) }); len(left) > 0 {
				t.Errorf("agents left after clean: %v", left)
			}
			if entries, _ := os.ReadDir(r.WorkDir); len(entries) > 0 {
				t.Errorf("work directory left after clean: %v", entries)
			}
		})
	})
	testutil.CheckLeaks(t, before)
}

func dial(t *testing.T, target Target, cfg Config) *Machine {
	t.Helper()
	m, err := Dial(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func newLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	led, err := ledger.Create(t.TempDir(), "run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return led
}

// assertClean checks that the peer's work directory is gone, no agent of
// it runs, and the ledger has nothing pending.
func assertClean(t *testing.T, workDir string, led *ledger.Ledger) {
	t.Helper()
	if left := testutil.Outliving(func() []int { return agentsIn(t, workDir) }); len(left) > 0 {
		t.Errorf("agents left: %v", left)
	}
	if entries, _ := os.ReadDir(workDir); len(entries) > 0 {
		t.Errorf("work directory left: %v", entries)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still holds %v", p)
	}
}

// agentsIn lists the running processes whose program lies below dir.
func agentsIn(t *testing.T, dir string) []int {
	t.Helper()
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, dir+"/") {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !bytes.Contains(stat, []byte(") Z ")) {
			out = append(out, pid)
		}
	}
	return out
}

func emptyFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
