package remote

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// noDeadlines is a connection that, like an SSH channel, has no deadlines.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error      { return errors.ErrUnsupported }
func (noDeadlines) SetReadDeadline(time.Time) error  { return errors.ErrUnsupported }
func (noDeadlines) SetWriteDeadline(time.Time) error { return errors.ErrUnsupported }

// The agent client gives up on a silent agent through a read deadline;
// over an SSH channel it needs withDeadlines to have one.
func TestWithDeadlinesGivesUpOnASilentPeer(t *testing.T) {
	ch, silent := net.Pipe()
	defer silent.Close()
	c := withDeadlines(noDeadlines{ch})
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a silent peer: %v; want the deadline exceeded", err)
	}
	// Past the deadline, the stream still carries what comes.
	c.SetReadDeadline(time.Time{})
	go silent.Write([]byte("x"))
	b := make([]byte, 1)
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read after the deadline: %d %q %v", n, b, err)
	}
}

func TestLinkUp(t *testing.T) {
	for line, want := range map[string]bool{
		"2: eth1@if5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP": true,
		"3: eth2: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN":                  false,
		"4: eth3: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 state DOWN":               true,
	} {
		if got, err := linkUp(line); err != nil || got != want {
			t.Errorf("linkUp(%q) = %v, %v; want %v", line, got, err, want)
		}
	}
	if _, err := linkUp("ip: garbage"); err == nil {
		t.Error("linkUp of a line without flags: no error")
	}
}
