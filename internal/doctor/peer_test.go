package doctor

import (
	"context"
	"path/filepath"
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
