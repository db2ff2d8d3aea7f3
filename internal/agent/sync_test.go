package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExecStartsAtTheRequestedMoment(t *testing.T) {
	c := dial(t, startServer(t))
	at := time.Now().Add(300 * time.Millisecond)
	r, err := c.Do(context.Background(), Request{Argv: []string{"true"}, StartAtUnixNS: at.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Unix(0, r.StartedUnixNS)
	if started.Before(at) {
		t.Errorf("started %s before the requested moment", at.Sub(started))
	}
	if late := started.Sub(at); late > 100*time.Millisecond {
		t.Errorf("started %s after the requested moment", late)
	}
	if r.EndedUnixNS < r.StartedUnixNS || r.EndedUnixNS-r.StartedUnixNS != r.WallNS {
		t.Errorf("end %d does not follow start %d by the wall time %d", r.EndedUnixNS, r.StartedUnixNS, r.WallNS)
	}
}

func TestExecRefusesAStartTooFarAhead(t *testing.T) {
	c := dial(t, startServer(t))
	_, err := c.Do(context.Background(), Request{Argv: []string{"true"}, StartAtUnixNS: time.Now().Add(2 * MaxStartDelay).UnixNano()})
	if err == nil || !strings.Contains(err.Error(), "ahead") {
		t.Fatalf("want a refusal naming the delay, got %v", err)
	}
}

func TestClockOffsetOfALocalAgentIsNearZero(t *testing.T) {
	c := dial(t, startServer(t))
	offset, rtt, err := ClockOffset(context.Background(), c.Do)
	if err != nil {
		t.Fatal(err)
	}
	if rtt <= 0 || offset.Abs() > rtt+time.Millisecond {
		t.Errorf("offset %s with round trip %s: same clock, want |offset| within the round trip", offset, rtt)
	}
}

// A client that hangs up must not leave its process running: background
// loads are stopped that way.
func TestHangUpStopsTheRunningProcess(t *testing.T) {
	sock := startServer(t)
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "still-running")
	go func() {
		_, _ = c.Do(context.Background(), Request{Argv: []string{"sh", "-c", "sleep 1; touch " + marker}})
	}()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the process outlived its client's connection")
	}
	// The agent still serves new clients.
	if err := dial(t, sock).Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
