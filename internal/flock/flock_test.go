package flock

import (
	"context"
	"errors"
	"path/filepath"
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
