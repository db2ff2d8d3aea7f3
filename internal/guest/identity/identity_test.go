package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesLinksInsideTheRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "hosts")
	if err := os.WriteFile(target, []byte("host's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "etc/hosts")); err != nil {
		t.Fatal(err)
	}
	if err := Write(root, "c-1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "host's own\n" {
		t.Fatalf("write followed the image's link out of the root: %q", b)
	}
	hosts, err := os.ReadFile(filepath.Join(root, "etc/hosts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "::1\tlocalhost", "127.0.1.1\tc-1\n"} {
		if !strings.Contains(string(hosts), want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "c-1\n" {
		t.Errorf("/etc/hostname = %q", b)
	}
}

func TestWriteMakesEtc(t *testing.T) {
	root := t.TempDir()
	if err := Write(root, "vm-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/hosts")); err != nil {
		t.Fatal(err)
	}
}
