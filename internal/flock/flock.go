// Package flock takes exclusive whole-file locks that a waiting caller can
// give up on. The kernel drops a lock with its holder, so a killed holder
// never leaves one behind.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// poll is how often a wait retries: flock has no timeout of its own, and
// a blocking call could not be interrupted by ctx.
const poll = 50 * time.Millisecond

// Lock takes an exclusive lock on path, creating the file if needed, and
// waits for it as long as ctx lets it. unlock releases it.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the last descriptor unlocks
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the lock on %s: %w", path, ctx.Err())
		case <-time.After(poll):
		}
	}
}
