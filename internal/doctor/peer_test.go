package doctor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/remote"
)

// Without a key to offer, doctor says so and skips what needs a login,
// in the checks' own order, without dialling.
func TestPeerWithoutCredentials(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	got := Peer(context.Background(), PeerOptions{
		Target: remote.Target{User: "lab", Host: "198.18.0.1", Port: 22},
		Config: remote.Config{KnownHosts: filepath.Join(t.TempDir(), "known_hosts")},
	})
	want := []Status{Skip, Skip, Missing, Skip, Skip, Skip}
	if len(got) != len(want) {
		t.Fatalf("Peer = %+v; want %d results", got, len(want))
	}
	for i, r := range got {
		if r.Status != want[i] {
			t.Errorf("%s: %s (%s); want %s", r.Name, r.Status, r.Detail, want[i])
		}
	}
	if got[2].Name != "peer authentication" || got[2].Fix == "" {
		t.Errorf("authentication: %+v; want it missing with what to do", got[2])
	}
}

// A key or known_hosts file that cannot be read is the check it belongs
// to that failed, not the peer's address: nothing is dialled.
func TestPeerKeyFileProblemsNameTheirStep(t *testing.T) {
	dir := t.TempDir()
	key, fifo := filepath.Join(dir, "key"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg    remote.Config
		failed string
	}{
		{remote.Config{Identity: key, KnownHosts: filepath.Join(dir, "none")}, "peer authentication"},
		{remote.Config{Identity: "/dev/zero", KnownHosts: filepath.Join(dir, "none")}, "peer authentication"},
		{remote.Config{KnownHosts: fifo}, "peer host key"},
	} {
		got := Peer(context.Background(), PeerOptions{Target: remote.Target{User: "lab", Host: "198.18.0.1", Port: 22}, Config: tc.cfg})
		for _, r := range got {
			if want := map[bool]Status{true: Fail, false: Skip}[r.Name == tc.failed]; r.Status != want {
				t.Errorf("%+v: %s: %s (%s); want %s", tc.cfg, r.Name, r.Status, r.Detail, want)
			}
		}
	}
}
