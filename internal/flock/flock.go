// Package flock takes exclusive whole-file locks that a waiting caller can
// give up on. The kernel drops a lock with its holder, so a killed holder
// never leaves one behind.
package flock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/regfile"
)

// poll is how often a wait retries: flock has no timeout of its own, and
// a blocking call could not be interrupted by ctx.
const poll = 50 * time.Millisecond

// unknownAfter is how long a waiter looks for the holder's note before it
// says it waits for an unknown holder: a holder writes its note just after
// it takes the lock, and one that takes it with Lock writes none.
const unknownAfter = time.Second

// Holder is who holds a lock and for what.
type Holder struct {
	procfs.Process
	What  string    `json:"what"`
	Since time.Time `json:"since"`
}

// Known says whether the holder left its note.
func (h Holder) Known() bool { return h.PID > 0 }

// String says what a waiter waits for, e.g. "pid 812 building the amd64
// image since 14:02:11 UTC (3m5s ago)".
func (h Holder) String() string {
	if !h.Known() {
		return "a holder that left no note"
	}
	return fmt.Sprintf("pid %d %s since %s (%s ago)", h.PID, h.What, h.Since.UTC().Format("15:04:05 MST"),
		time.Since(h.Since).Round(time.Second))
}

// Lock takes an exclusive lock on path, creating the file if needed, and
// waits for it as long as ctx lets it. unlock releases it.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	return LockFor(ctx, path, "", nil)
}

// LockFor is Lock for a holder that says what it does under the lock, in
// a note beside it (path.holder), so that a waiter can say what it waits
// for. waiting, when not nil, is told once, as soon as the wait begins,
// who holds the lock.
func LockFor(ctx context.Context, path, what string, waiting func(Holder)) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	var began time.Time
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return locked(f, path, what), nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if began.IsZero() {
			began = time.Now()
		}
		if waiting != nil {
			if h, err := ReadHolder(path); err == nil || time.Since(began) >= unknownAfter {
				waiting(h)
				waiting = nil
			}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the lock on %s: %w", path, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// locked writes the holder's note, when it has something to say, and
// returns the unlock that removes it.
func locked(f *os.File, path, what string) func() {
	note := holderPath(path)
	if what == "" {
		return func() { f.Close() } // closing the last descriptor unlocks
	}
	// Without its note the lock is still a lock: waiters only say less.
	if self, err := procfs.Self(); err == nil {
		b, _ := json.Marshal(Holder{Process: self, What: what, Since: time.Now()})
		_ = regfile.WriteFile(note, b, 0o600)
	}
	return func() {
		os.Remove(note) // before letting go: a note is never the next holder's
		f.Close()
	}
}

func holderPath(lock string) string { return lock + ".holder" }

// ErrNoHolder says a lock's note names no live holder: nobody holds it,
// the holder has not written its note yet, or took it with Lock.
var ErrNoHolder = errors.New("no live holder noted")

// ReadHolder reads the note of the lock at path.
func ReadHolder(path string) (Holder, error) {
	b, err := os.ReadFile(holderPath(path))
	if err != nil {
		return Holder{}, fmt.Errorf("%w: %w", ErrNoHolder, err)
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil {
		return Holder{}, fmt.Errorf("%w: %s: %w", ErrNoHolder, holderPath(path), err)
	}
	if !h.Alive() {
		return Holder{}, fmt.Errorf("%w: pid %d is gone", ErrNoHolder, h.PID)
	}
	return h, nil
}
