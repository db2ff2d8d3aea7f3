package interrupt

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signalled is the cause of a context cancelled by a signal: it is
// context.Canceled to errors.Is, and names the signal.
type Signalled struct{ Signal syscall.Signal }

func (s Signalled) Error() string { return unix.SignalName(s.Signal) }
func (s Signalled) Unwrap() error { return context.Canceled }

// OnSignal returns a context cancelled by the first SIGINT or SIGTERM
// this process gets, after told has been called with it. With eof not
// nil, the end of eof is a SIGINT too: how a command is stopped from
// another machine, since sshd passes no signal to the session of a root
// login. Output nobody reads any more (the connection is gone) is then no
// reason to die before the teardown: SIGPIPE is ignored.
func OnSignal(told func(os.Signal), eof io.Reader) (context.Context, context.CancelFunc) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	if eof != nil {
		signal.Ignore(syscall.SIGPIPE)
	}
	return watch(ch, func() { signal.Stop(ch) }, told, eof)
}

// watch cancels the context it returns with the first signal on ch, or a
// SIGINT at the end of eof when not nil. release is called before told,
// as soon as a signal came or the context ended otherwise: from then on
// the process takes signals as if nobody had asked for them.
func watch(ch chan os.Signal, release func(), told func(os.Signal), eof io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	if eof != nil {
		go func() {
			io.Copy(io.Discard, eof)
			select {
			case ch <- syscall.SIGINT:
			default: // a signal is there already
			}
		}()
	}
	go func() {
		select {
		case s := <-ch:
			release()
			told(s)
			cancel(Signalled{s.(syscall.Signal)})
		case <-ctx.Done():
			release()
		}
	}()
	return ctx, func() { cancel(nil) }
}
