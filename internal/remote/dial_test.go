package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// unreachable is never dialled: each case fails before connecting.
var unreachable = Target{User: "lab", Host: "198.18.0.1", Port: 22}

func TestDialWithoutCredentials(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	_, err := Dial(context.Background(), unreachable, Config{KnownHosts: filepath.Join(t.TempDir(), "known_hosts")})
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Errorf("Dial with neither agent nor identity: %v; want ErrNoCredentials naming SSH_AUTH_SOCK", err)
	}
}

// A passphrase would need a prompt: vfleet sends the user to the agent.
func TestDialRefusesPassphraseIdentity(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	id := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(id, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), unreachable, Config{KnownHosts: filepath.Join(t.TempDir(), "known_hosts"), Identity: id})
	if err == nil || !strings.Contains(err.Error(), "ssh-add "+id) {
		t.Errorf("Dial with a passphrase-protected identity: %v; want the advice to add it to the agent", err)
	}
}

func TestDebianArch(t *testing.T) {
	for machine, want := range map[string]string{"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"} {
		if got, err := debianArch(machine); got != want || err != nil {
			t.Errorf("debianArch(%q) = %q, %v; want %q", machine, got, err, want)
		}
	}
	if _, err := debianArch("riscv64"); !errors.Is(err, ErrArch) {
		t.Errorf("debianArch(riscv64): %v; want ErrArch", err)
	}
}
