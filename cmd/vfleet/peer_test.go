package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/testutil"
)

// doctor --peer checks a remote machine, starting nothing there: every
// step up to its work directory, and the network workloads' programs,
// each there with its version or missing with its package.
func TestDoctorPeer(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		stdout, stderr, code := c.run("doctor", "--peer", r.URL, "--peer-identity", r.Identity, "--peer-known-hosts", r.KnownHosts)
		t.Logf("vfleet doctor --peer (exit %d):\n%s", code, stdout)
		for _, want := range []string{
			`OK\s+peer reachable`, `OK\s+peer host key\s+` + regexp.QuoteMeta(ssh.FingerprintSHA256(r.HostKey)),
			`OK\s+peer authentication\s+as root`, `OK\s+peer architecture\s+` + image.HostArch, `OK\s+peer work directory\s+made and removed ` + r.WorkDir,
		} {
			if !regexp.MustCompile(want).MatchString(stdout) {
				t.Errorf("doctor --peer: no %q in\n%s", want, stdout)
			}
		}
		for _, prog := range []string{"iperf3", "sockperf"} {
			if !regexp.MustCompile(`(OK\s+peer ` + prog + `\s+/\S+ \(` + prog + ` \S+\))|(MISSING\s+peer ` + prog + `.*\n.*install the Debian package ` + prog + ` on the peer)`).MatchString(stdout) {
				t.Errorf("doctor --peer: %s neither there with its version nor missing with its package in\n%s", prog, stdout)
			}
		}
		if ready := !strings.Contains(stdout, "MISSING"); (code == 0) != ready {
			t.Errorf("doctor --peer: exit %d, stderr %q, with everything there: %v", code, stderr, ready)
		}
		if entries, _ := os.ReadDir(r.WorkDir); len(entries) > 0 {
			t.Errorf("doctor --peer left %v in the peer's work directory", entries)
		}
	})
	testutil.CheckLeaks(t, before)
}

// What a run started on a peer, recorded in its ledger, is what `vfleet
// clean` removes there: it reconnects with the files the ledger names.
func TestCleanReachesThePeer(t *testing.T) {
	testutil.RequiresRoot(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	before := testutil.TakeSnapshot(t)
	c := newCLI(t)
	t.Run("peer", func(t *testing.T) {
		r := testutil.RemoteMachine(t)
		target, err := remote.ParseURL(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		m, err := remote.Dial(ctx, target, remote.Config{KnownHosts: r.KnownHosts, Identity: r.Identity})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		state := t.TempDir()
		led, err := ledger.Create(filepath.Join(state, "ledger"), "r1")
		if err != nil {
			t.Fatal(err)
		}
		defer led.Close()
		agentFor := func(arch string) (string, error) {
			return session.AgentBinary(filepath.Join(filepath.Dir(c.bin), "vfleet-agent"), arch)
		}
		if err := m.StartAgent(ctx, led, agentFor); err != nil {
			t.Fatal(err)
		}
		// The run's vfleet is this test, alive: --force cleans it all the same.
		stdout, stderr, code := c.run("--state-dir", state, "clean", "--force")
		if code != 0 || !strings.Contains(stdout, "removed "+remote.KindPeer+" "+r.URL) {
			t.Errorf("vfleet clean: exit %d, stdout %q, stderr %q; want the peer's agent removed", code, stdout, stderr)
		}
		if entries, _ := os.ReadDir(r.WorkDir); len(entries) > 0 {
			t.Errorf("vfleet clean left %v on the peer", entries)
		}
		if _, err := m.Agent(ctx); err == nil {
			t.Error("the peer's agent still answers after vfleet clean")
		}
	})
	testutil.CheckLeaks(t, before)
}
