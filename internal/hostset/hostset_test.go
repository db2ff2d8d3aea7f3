package hostset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/ledger"
)

// setOf is a set under / whose settings are files in a temporary
// directory, with the host's own values.
func setOf(t *testing.T, own map[string]string) (Set, string) {
	t.Helper()
	dir := t.TempDir()
	for name, v := range own {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Set{Kind: "test-set", Dir: "/", State: filepath.Join(t.TempDir(), "state.json")}, strings.TrimPrefix(dir, "/")
}

func value(t *testing.T, s Set, name string) string {
	t.Helper()
	v, err := s.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newLedger(t *testing.T, run string) *ledger.Ledger {
	t.Helper()
	led, err := ledger.Create(t.TempDir(), run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return led
}

// A second run may share the values a first holds, not change them; the
// host's own come back after the last, whatever order the runs end in.
func TestHoldsShareValuesAndTheHostsComeBack(t *testing.T) {
	s, dir := setOf(t, map[string]string{"a": "1", "b": "2"})
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ctx := context.Background()
	want := []Setting{{Name: a, Value: "10"}, {Name: b, Value: "20"}}
	if _, _, err := s.Hold(ctx, newLedger(t, "r1"), "r1", want); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Hold(ctx, newLedger(t, "r2"), "r2", []Setting{{Name: a, Value: "11"}}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "r1") {
		t.Fatalf("a hold at other values: %v, want a conflict naming r1", err)
	}
	if _, _, err := s.Hold(ctx, newLedger(t, "r3"), "r3", want); err != nil {
		t.Fatal(err)
	}
	for _, holder := range []string{"r1", "r2"} {
		if err := s.Release(ctx, holder); err != nil {
			t.Fatal(err)
		}
	}
	if value(t, s, a) != "10" {
		t.Fatal("r3 still holds the set, yet its value went back")
	}
	if err := s.Release(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	if value(t, s, a) != "1" || value(t, s, b) != "2" {
		t.Errorf("after the last hold: a=%s b=%s, want the host's 1 and 2", value(t, s, a), value(t, s, b))
	}
	if _, err := os.Stat(s.State); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left behind: %v", err)
	}
}

// An optional setting the kernel refuses is named and left; a required
// one fails the hold, and what was changed before it still comes back
// through the ledger.
func TestRefusedSettings(t *testing.T) {
	s, dir := setOf(t, map[string]string{"a": "1"})
	a := filepath.Join(dir, "a")
	ctx := context.Background()
	// Readable, and refused to any writer.
	const refusing = "proc/self/stat"
	led := newLedger(t, "r")
	_, refused, err := s.Hold(ctx, led, "r", []Setting{{Name: a, Value: "5"}, {Name: refusing, Value: "x", Optional: true}})
	if err != nil || len(refused) != 1 || refused[0] != refusing {
		t.Fatalf("refused %v, %v; want the optional setting named", refused, err)
	}
	if err := s.Release(ctx, "r"); err != nil {
		t.Fatalf("release puts back only what it could change: %v", err)
	}

	led = newLedger(t, "q")
	entry, _, err := s.Hold(ctx, led, "q", []Setting{{Name: a, Value: "7"}, {Name: refusing, Value: "x"}})
	if err == nil {
		t.Fatal("a required setting refused, and the hold succeeded")
	}
	if value(t, s, a) != "7" {
		t.Fatalf("a = %s: the first setting was not written", value(t, s, a))
	}
	if err := Undo(ctx, entry); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if value(t, s, a) != "1" {
		t.Errorf("after the failed hold's undo: a = %s, want the host's 1", value(t, s, a))
	}
	if _, err := os.Stat(s.State); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left behind: %v", err)
	}
}

// A state file that KSM's holds wrote before the set kept its order (no
// "order", no "held") still puts the host's values back.
func TestStateFromBeforeTheOrderWasKept(t *testing.T) {
	s, dir := setOf(t, map[string]string{"run": "1", "pages_to_scan": "1000"})
	old := `{"saved":{"` + filepath.Join(dir, "run") + `":"0","` + filepath.Join(dir, "pages_to_scan") + `":"100"},"holders":["7"]}`
	if err := os.WriteFile(s.State, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(context.Background(), "7"); err != nil {
		t.Fatal(err)
	}
	if value(t, s, filepath.Join(dir, "run")) != "0" || value(t, s, filepath.Join(dir, "pages_to_scan")) != "100" {
		t.Error("the host's values did not come back")
	}
}
