package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/ssh"
)

// Stream runs argv on the peer, each argument quoted for its POSIX shell,
// with its standard output and error copied to stdout and stderr as they
// come (nil discards). When ctx ends, the command's standard input is
// closed, and it gets grace to end; past that the session is closed,
// which is all a client can do. A command that is to undo its own work
// when stopped must end on its input's end: sshd passes no signal to the
// session of a root login (its session is not privilege-separated). Its
// exit status is in the error (ExitStatus).
func (m *Machine) Stream(ctx context.Context, stdout, stderr io.Writer, grace time.Duration, argv ...string) error {
	if len(argv) == 0 {
		return errors.New("run on the peer: no command")
	}
	select {
	case m.sessions <- struct{}{}:
		defer func() { <-m.sessions }()
	case <-ctx.Done():
	}
	// Checked here too: a free session slot may win the select above.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s on %s: %w", argv[0], m.Target, err)
	}
	s, err := m.client.NewSession()
	if err != nil {
		return fmt.Errorf("ssh session on %s: %w", m.Target, err)
	}
	defer s.Close()
	s.Stdout, s.Stderr = stdout, stderr
	stdin, err := s.StdinPipe()
	if err != nil {
		return fmt.Errorf("ssh session on %s: %w", m.Target, err)
	}
	if err := s.Start(quote(argv)); err != nil {
		return fmt.Errorf("start %s on %s: %w", argv[0], m.Target, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		stdin.Close()
		select {
		case err = <-done:
		case <-time.After(grace):
			s.Close()
			<-done
			return fmt.Errorf("%s on %s: not ended %s after its input: %w", argv[0], m.Target, grace, ctx.Err())
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s on %s: %w", ErrCommand, argv[0], m.Target, err)
	}
	return nil
}

// ExitStatus is the exit status of the command whose failure err is, and
// whether err says one.
func ExitStatus(err error) (int, bool) {
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), true
	}
	return 0, false
}
