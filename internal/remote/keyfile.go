package remote

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"

	"github.com/vfleet/vfleet/internal/regfile"
)

// MaxKeyFile bounds an identity or a known_hosts file: both are a few
// kilobytes, and /dev/zero given as one must not be read to the end.
const MaxKeyFile = 1 << 20

var (
	// ErrIdentity says the identity file could not be read or is no
	// private key vfleet can use.
	ErrIdentity = errors.New("identity unusable")
	// ErrKnownHosts says the known_hosts file could not be read.
	ErrKnownHosts = errors.New("known_hosts unusable")
)

// CheckIdentity refuses an identity file that is not a regular file of at
// most MaxKeyFile (a directory, a device, a named pipe, which would block,
// a missing file), without reading it: the one check of every key file
// vfleet is given, made before anything starts.
func CheckIdentity(path string) error {
	if err := regfile.Check(path, MaxKeyFile); err != nil {
		return fmt.Errorf("%w: %w (want a private key file of at most %s)", ErrIdentity, err, regfile.Bytes(MaxKeyFile))
	}
	return nil
}

// CheckKnownHosts is CheckIdentity's check for a known_hosts file, which
// may be missing: it then knows no host, and the error of the first
// connection says how to accept the peer's key into it.
func CheckKnownHosts(path string) error {
	err := regfile.Check(path, MaxKeyFile)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%w: %w (want a known_hosts file of at most %s)", ErrKnownHosts, err, regfile.Bytes(MaxKeyFile))
}

// Check checks the files c names (the default known_hosts too) as
// CheckIdentity and CheckKnownHosts do.
func (c Config) Check() error {
	if c.Identity != "" {
		if err := CheckIdentity(c.Identity); err != nil {
			return err
		}
	}
	file, err := c.knownHosts()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKnownHosts, err)
	}
	return CheckKnownHosts(file)
}

// readIdentity reads an identity file, bounded and without blocking.
func readIdentity(path string) ([]byte, error) {
	var b bytes.Buffer
	if _, err := regfile.Copy(&b, path, MaxKeyFile); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	return b.Bytes(), nil
}
