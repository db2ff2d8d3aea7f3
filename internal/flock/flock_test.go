package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second taker waits for the first and gives up with its context; once
// the first lets go, the lock is free.
func TestLockWaitsAndGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want the context's deadline", err)
	}
	unlock()
	again, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
	if _, err := Lock(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Error("a lock file that cannot be made must fail")
	}
}

// A waiter is told at once who holds the lock and for what, from the
// holder's note; the note goes with the lock, and a holder that left none
// is said to be unknown rather than waited for in silence.
func TestWaiterIsToldWhoHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := LockFor(context.Background(), path, "building the arm64 image", nil)
	if err != nil {
		t.Fatal(err)
	}
	wait := func() (told []Holder) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := LockFor(ctx, path, "", func(h Holder) {
			told = append(told, h)
			cancel()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("wait while held: %v, want to give up once told", err)
		}
		return told
	}
	told := wait()
	if len(told) != 1 || told[0].PID != os.Getpid() || told[0].What != "building the arm64 image" {
		t.Fatalf("waiter told %+v, want this process building the arm64 image", told)
	}
	if s := told[0].String(); !strings.HasPrefix(s, fmt.Sprintf("pid %d building the arm64 image since ", os.Getpid())) {
		t.Errorf("holder said as %q", s)
	}
	unlock()
	if _, err := ReadHolder(path); !errors.Is(err, ErrNoHolder) {
		t.Errorf("note after unlock: %v, want ErrNoHolder", err)
	}

	silent, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer silent()
	if told := wait(); len(told) != 1 || told[0].Known() || told[0].String() != "a holder that left no note" {
		t.Fatalf("waiter on a holder without a note told %+v", told)
	}
}
