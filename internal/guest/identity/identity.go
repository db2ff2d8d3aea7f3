// Package identity writes the files that tell a guest who it is, as
// container runtimes provide them: /etc/hostname with the guest's name and
// an /etc/hosts that resolves localhost and that name. Images are built
// without them (a user's OCI image often has neither), and a tool that
// resolves localhost or its own name would fail for no reason the
// isolation explains.
package identity

import (
	"fmt"
	"os"
	"path/filepath"
)

// Files returns the identity files of a guest named hostname, by their
// path inside the guest.
func Files(hostname string) map[string][]byte {
	return map[string][]byte{
		"/etc/hostname": []byte(hostname + "\n"),
		// 127.0.1.1 for the guest's own name is Debian's convention: it
		// resolves without a network, whichever data path the guest is on.
		"/etc/hosts": []byte(fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", hostname)),
	}
}

// Write puts the identity files into the guest's root root, replacing
// what the image has there. The root must be the guest's own writable
// view (an overlay's merged directory, a VM's own disk): never a shared
// image layer.
func Write(root, hostname string) error {
	for path, content := range Files(hostname) {
		dst := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("identity: %w", err)
		}
		// A symlink in the image (/etc/hosts -> /run/...) must not send
		// the write outside the guest's root: replace the link itself.
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("identity: %w", err)
		}
		if err := os.WriteFile(dst, content, 0o644); err != nil {
			return fmt.Errorf("identity: %w", err)
		}
	}
	return nil
}
