package guest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
)

// releaseTimeout bounds the undo of one recorded resource.
const releaseTimeout = 30 * time.Second

// Teardown is the LIFO undo list a guest builds while it starts: each step
// that creates something pushes its undo, so a failed start and a normal
// stop run the very same code. It runs once; it is not safe for concurrent
// use (guests guard it with their own lock).
type Teardown struct {
	steps []func() error
}

// Push adds an undo step.
func (t *Teardown) Push(undo func() error) { t.steps = append(t.steps, undo) }

// PushRelease adds the release of a ledger entry: its undo function, then
// marking it done. It is bounded in time and ignores the caller's context,
// so it also completes after Ctrl-C.
func (t *Teardown) PushRelease(l *ledger.Ledger, e ledger.Entry) {
	t.Push(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return l.Release(ctx, e)
	})
}

// MakeDir makes a guest's state directory dir and its subdirectories
// (relative to it), recording dir in the ledger first and pushing its
// removal, so a failed start, a stop and `vfleet clean` all take it away.
func (t *Teardown) MakeDir(l *ledger.Ledger, dir string, subdirs ...string) error {
	e, err := l.Record(ledger.KindDir, dir, nil)
	if err != nil {
		return err
	}
	t.PushRelease(l, e)
	for _, d := range append([]string{""}, subdirs...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Run undoes everything newest first and empties the list; every step runs
// even when an earlier one fails.
func (t *Teardown) Run() error {
	var errs []error
	for i := len(t.steps) - 1; i >= 0; i-- {
		if err := t.steps[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.steps = nil
	return errors.Join(errs...)
}

// Tail returns at most the last n bytes of a log, for error messages.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
