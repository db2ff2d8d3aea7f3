package fleet

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
)

func TestFreeRefusesAFleetUpAndForgetsAGoneOne(t *testing.T) {
	ctx := context.Background()
	d := At(t.TempDir(), io.Discard)
	if err := d.Free(ctx, "quick"); err != nil {
		t.Fatalf("no fleet yet: %v", err)
	}
	s := State{Name: "quick", RunID: 3, RunKey: "r3-000000", DB: filepath.Join(t.TempDir(), "none.db"), Started: time.Now().UTC()}
	if err := d.Publish(s); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.ledgerRoot(), s.RunKey), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(ctx, "quick"); err == nil || !strings.Contains(err.Error(), "fleet quick is already up (run 3") {
		t.Fatalf("a fleet up: %v; want it refused, naming its run", err)
	}
	if err := os.Remove(filepath.Join(d.ledgerRoot(), s.RunKey)); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(ctx, "quick"); err != nil {
		t.Fatalf("a gone fleet: %v", err)
	}
	if _, err := d.Read("quick"); !errors.Is(err, ErrNoFleet) {
		t.Fatalf("a gone fleet is forgotten: %v", err)
	}
}

func TestDownOfAFleetWithNothingLeftForgetsIt(t *testing.T) {
	d := At(t.TempDir(), io.Discard)
	s := State{Name: "quick", RunKey: "r1-000000", DB: filepath.Join(t.TempDir(), "none.db")}
	if err := d.Publish(s); err != nil {
		t.Fatal(err)
	}
	n, err := d.Down(context.Background(), s, func(r ledger.Removed) { t.Errorf("removed %v from a fleet without a ledger", r) })
	if n != 0 || err != nil {
		t.Fatalf("Down = %d, %v; want nothing removed and no error", n, err)
	}
	if _, err := d.Read("quick"); !errors.Is(err, ErrNoFleet) {
		t.Fatalf("after down: %v; want the fleet forgotten", err)
	}
}
