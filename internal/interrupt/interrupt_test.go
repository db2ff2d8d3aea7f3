package interrupt

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fake is a signal channel the test feeds, and a record of what watch
// did with it.
type fake struct {
	ch       chan os.Signal
	released chan struct{}
	mu       sync.Mutex
	told     []os.Signal
	// toldAfterRelease is whether each told came after the release.
	toldAfterRelease []bool
}

func newFake() *fake {
	return &fake{ch: make(chan os.Signal, 1), released: make(chan struct{})}
}

func (f *fake) release() { close(f.released) }

func (f *fake) tell(s os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	after := false
	select {
	case <-f.released:
		after = true
	default:
	}
	f.told = append(f.told, s)
	f.toldAfterRelease = append(f.toldAfterRelease, after)
}

func (f *fake) watch(eof io.Reader) (context.Context, context.CancelFunc) {
	return watch(f.ch, f.release, f.tell, eof)
}

// The first signal cancels the context with the signal as its cause,
// an interruption to errors.Is; the handler lets the signal go first, so
// a second one takes its default action (kills the process).
func TestFirstSignalCancels(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		f := newFake()
		ctx, cancel := f.watch(nil)
		f.ch <- sig
		<-ctx.Done()
		var s Signalled
		if cause := context.Cause(ctx); !errors.As(cause, &s) || s.Signal != sig || !errors.Is(cause, context.Canceled) || !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("%v: cause %v, err %v; want the signal, an interruption", sig, cause, ctx.Err())
		}
		if got, want := context.Cause(ctx).Error(), map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]; got != want {
			t.Errorf("cause says %q; want %q", got, want)
		}
		<-f.released
		// A second signal: nobody takes it from the channel any more, and
		// the user is not told again.
		f.ch <- syscall.SIGINT
		cancel()
		f.mu.Lock()
		if len(f.told) != 1 || f.told[0] != sig || !f.toldAfterRelease[0] {
			t.Errorf("%v: told %v (after the release: %v); want once, after the release", sig, f.told, f.toldAfterRelease)
		}
		f.mu.Unlock()
	}
}

// A command that ends without a signal lets the signals go and tells
// nobody.
func TestCancelWithoutSignal(t *testing.T) {
	f := newFake()
	ctx, cancel := f.watch(nil)
	cancel()
	<-f.released
	if cause := context.Cause(ctx); cause != context.Canceled {
		t.Errorf("cause %v; want plain context.Canceled", cause)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.told) != 0 {
		t.Errorf("told %v; want nothing", f.told)
	}
}

// The end of the input is a Ctrl-C when asked: how a run on another
// machine is stopped.
func TestEOFIsSIGINT(t *testing.T) {
	f := newFake()
	ctx, cancel := f.watch(strings.NewReader("ignored until its end"))
	defer cancel()
	<-ctx.Done()
	var s Signalled
	if !errors.As(context.Cause(ctx), &s) || s.Signal != syscall.SIGINT {
		t.Errorf("cause %v; want SIGINT", context.Cause(ctx))
	}
}

// A signal that came before the input ended is the one that counts, and
// the end of the input does not wait for room on the channel.
func TestSignalBeforeEOF(t *testing.T) {
	f := newFake()
	r, w := io.Pipe()
	ctx, cancel := f.watch(r)
	defer cancel()
	f.ch <- syscall.SIGTERM
	<-ctx.Done()
	w.Close()
	var s Signalled
	if !errors.As(context.Cause(ctx), &s) || s.Signal != syscall.SIGTERM {
		t.Errorf("cause %v; want SIGTERM", context.Cause(ctx))
	}
}
