package remote

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/regfile"
)

// Every key and known_hosts file is a regular file of at most MaxKeyFile,
// refused otherwise without being read: a named pipe would block, and
// /dev/zero would be read until memory ran out.
func TestKeyFilesAreBoundedAndNeverBlock(t *testing.T) {
	dir := t.TempDir()
	fifo, big, key := filepath.Join(dir, "fifo"), filepath.Join(dir, "big"), filepath.Join(dir, "key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, MaxKeyFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{
		fifo: regfile.ErrNotRegular, "/dev/zero": regfile.ErrNotRegular, dir: regfile.ErrNotRegular,
		big: regfile.ErrTooLarge, filepath.Join(dir, "none"): fs.ErrNotExist,
	} {
		if err := CheckIdentity(path); !errors.Is(err, ErrIdentity) || !errors.Is(err, want) {
			t.Errorf("identity %s: %v, want %v", path, err, want)
		}
		err := CheckKnownHosts(path)
		if want == fs.ErrNotExist {
			want = nil // knows no host yet: the first connection says how to add one
		}
		if (want == nil) != (err == nil) || want != nil && (!errors.Is(err, ErrKnownHosts) || !errors.Is(err, want)) {
			t.Errorf("known_hosts %s: %v, want %v", path, err, want)
		}
		// Dial refuses them too, before it connects.
		target := Target{User: "root", Host: "127.0.0.1", Port: 2}
		if _, err := Dial(context.Background(), target, Config{Identity: path, KnownHosts: filepath.Join(dir, "none")}); !errors.Is(err, ErrIdentity) {
			t.Errorf("dial with identity %s: %v, want %v", path, err, ErrIdentity)
		}
		if want != nil {
			if _, err := Dial(context.Background(), target, Config{Identity: key, KnownHosts: path}); !errors.Is(err, ErrKnownHosts) {
				t.Errorf("dial with known_hosts %s: %v, want %v", path, err, ErrKnownHosts)
			}
		}
	}
	if err := (Config{Identity: key, KnownHosts: filepath.Join(dir, "none")}).Check(); err != nil {
		t.Errorf("a key file and a known_hosts yet to be made: %v", err)
	}
}
