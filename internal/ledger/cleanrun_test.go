package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCleanRunUndoesOneLedgerOnly(t *testing.T) {
	root := t.TempDir()
	victims := map[string]string{}
	for _, run := range []string{"mine", "other"} {
		victims[run] = filepath.Join(t.TempDir(), run)
		if err := os.Mkdir(victims[run], 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := Create(root, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Record(KindDir, victims[run], nil); err != nil {
			t.Fatal(err)
		}
		l.f.Close() // left pending, as a fleet's `up` leaves its ledger
		l.f = nil
	}

	// This process owns both ledgers, as `fleet up` owns its own while it
	// still runs.
	if _, err := CleanRun(context.Background(), root, "mine", CleanOptions{}); !errors.Is(err, ErrOwnerAlive) {
		t.Fatalf("cleaning a ledger whose owner lives: err = %v, want ErrOwnerAlive", err)
	}
	if _, err := os.Stat(victims["mine"]); err != nil {
		t.Fatalf("a refused clean removed something: %v", err)
	}

	removed, err := CleanRun(context.Background(), root, "mine", CleanOptions{Force: true})
	if err != nil || len(removed) != 1 || removed[0].Entry.ID != victims["mine"] {
		t.Fatalf("CleanRun = %+v, %v", removed, err)
	}
	if _, err := os.Stat(victims["mine"]); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the run's directory is still there")
	}
	if _, err := os.Stat(filepath.Join(root, "mine")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the emptied ledger is still there")
	}
	if _, err := os.Stat(victims["other"]); err != nil {
		t.Fatalf("another run's resource was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "other", journalName)); err != nil {
		t.Fatalf("another run's ledger was touched: %v", err)
	}

	removed, err = CleanRun(context.Background(), root, "mine", CleanOptions{Force: true})
	if err != nil || len(removed) != 0 {
		t.Fatalf("cleaning a run with no ledger left = %+v, %v; want nothing", removed, err)
	}
}
