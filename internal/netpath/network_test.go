package netpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// echoServer listens in the peer and echoes one line per connection.
func echoServer(t *testing.T, nsPath string) int {
	t.Helper()
	var l net.Listener
	if err := nsthread.DoPath(nsPath, func() (err error) { l, err = net.Listen("tcp4", "0.0.0.0:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// roundTrips connects from the namespace to addr and echoes n messages.
func roundTrips(t *testing.T, nsPath string, addr netip.AddrPort, n int) error {
	t.Helper()
	var c net.Conn
	err := nsthread.DoPath(nsPath, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr.String(), 5*time.Second)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1400)
	for i := 0; i < n; i++ {
		if _, err := c.Write(buf); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
	}
	return nil
}

func newLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	led, err := ledger.Create(t.TempDir(), "netpath-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return led
}

func runKey() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// TestCleanRemovesAnAbandonedNetwork leaves a network without closing it,
// as a killed vfleet would, and checks that undoing its ledger entries
// removes the namespaces.
func TestCleanRemovesAnAbandonedNetwork(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{Routed}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Attach("g", Routed); err != nil {
		t.Fatal(err)
	}
	pending := led.Pending()
	if len(pending) != 3 {
		t.Fatalf("ledger lists %d entries, want host side, peer and guest: %v", len(pending), pending)
	}
	for _, e := range pending {
		if _, err := os.Stat(filepath.Join(nsDir, e.ID)); err != nil {
			t.Fatalf("namespace %s not there before clean: %v", e.ID, err)
		}
		if err := undoNetns(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		if err := undoNetns(context.Background(), e); err != nil {
			t.Fatalf("undo is not idempotent: %v", err)
		}
		_ = led.Done(e)
	}
	n.Close() // releases handles; the namespaces are already gone
}

func TestAttachRejectsPathsNotBuilt(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: newLedger(t), Paths: []Path{Bridge}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.Attach("g", XDP); err == nil {
		t.Fatal("attached to a path the run did not build")
	}
	if _, _, err := n.Attach("g", Bridge); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Attach("g", Bridge); err == nil {
		t.Fatal("attached one guest twice")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Attach("h", Bridge); !errors.Is(err, errClosed) {
		t.Fatalf("attach after close: %v", err)
	}
}
