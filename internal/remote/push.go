package remote

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vfleet/vfleet/internal/treetar"
)

// Push copies the named entries of the local directory dir (files, and
// directories with all they hold) into the directory to on the peer,
// which it makes: one tar stream through a session's standard input into
// the peer's tar, so nothing but tar is needed there (treetar.Write).
func (m *Machine) Push(ctx context.Context, dir string, names []string, to string) error {
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := treetar.Write(pw, dir, names)
		pw.CloseWithError(err)
		written <- err
	}()
	_, err := m.sh(ctx, pr, `mkdir -p "$1" && tar -xpf - -C "$1"`, to)
	// A peer's tar that gave up reads no more: the writer must stop too.
	pr.CloseWithError(io.ErrClosedPipe)
	if werr := <-written; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return fmt.Errorf("push %s to %s: %w", dir, m.Target, err)
	}
	return nil
}
