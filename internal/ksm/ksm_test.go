package ksm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/ledger"
)

// fakeHost is a KSM knobs directory with the host's own settings.
func fakeHost(t *testing.T) Host {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"run": "0", "pages_to_scan": "100", "sleep_millisecs": "200",
		"pages_shared": "7", "pages_sharing": "70", "full_scans": "3"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Host{Dir: dir, State: filepath.Join(t.TempDir(), "ksm.json")}
}

func knobsOf(t *testing.T, h Host) string {
	t.Helper()
	var out []string
	for _, name := range []string{"run", "pages_to_scan", "sleep_millisecs"} {
		v, err := h.read(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, name+"="+v)
	}
	return strings.Join(out, " ")
}

const hostOwn = "run=0 pages_to_scan=100 sleep_millisecs=200"

// TestHoldsAreCountedAndSettingsComeBack: KSM stays on while any run
// holds it and gets the host's settings back after the last.
func TestHoldsAreCountedAndSettingsComeBack(t *testing.T) {
	h := fakeHost(t)
	ctx := context.Background()
	led, err := ledger.Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	a, err := h.Hold(ctx, led, "a")
	if err != nil {
		t.Fatal(err)
	}
	on := "run=1 pages_to_scan=" + pagesToScan + " sleep_millisecs=" + sleepMillisecs
	if got := knobsOf(t, h); got != on {
		t.Fatalf("held: %s, want %s", got, on)
	}
	if _, err := h.Hold(ctx, led, "b"); err != nil {
		t.Fatal(err)
	}
	if err := led.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := knobsOf(t, h); got != on {
		t.Fatalf("b still holds KSM, yet it is %s", got)
	}
	if err := h.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := knobsOf(t, h); got != hostOwn {
		t.Fatalf("after the last hold: %s, want the host's %s", got, hostOwn)
	}
	if _, err := os.Stat(h.State); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left behind: %v", err)
	}
	if err := h.Release(ctx, "b"); err != nil {
		t.Errorf("a second release: %v", err)
	}
}

// TestCleanPutsSettingsBackAfterACrash: a run that died holding KSM is
// ended by cleaning its ledger, which puts the host's settings back.
func TestCleanPutsSettingsBackAfterACrash(t *testing.T) {
	h := fakeHost(t)
	root := t.TempDir()
	led, err := ledger.Create(root, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Hold(context.Background(), led, "crashed"); err != nil {
		t.Fatal(err)
	}
	// The run dies without releasing: its ledger is closed as it was.
	led.Close()
	if got := knobsOf(t, h); !strings.HasPrefix(got, "run=1") {
		t.Fatalf("held: %s", got)
	}
	removed, err := ledger.Clean(context.Background(), root, ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Entry.Kind != KindHold {
		t.Errorf("clean removed %v, want the one KSM hold", removed)
	}
	if got := knobsOf(t, h); got != hostOwn {
		t.Errorf("after clean: %s, want the host's %s", got, hostOwn)
	}
}

func TestNoKSM(t *testing.T) {
	h := Host{Dir: filepath.Join(t.TempDir(), "none"), State: filepath.Join(t.TempDir(), "s")}
	led, err := ledger.Create(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if _, err := h.Hold(context.Background(), led, "x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("hold without KSM: %v, want ErrUnavailable", err)
	}
	if p := led.Pending(); len(p) != 0 {
		t.Errorf("ledger holds %v", p)
	}
}

func TestReadStats(t *testing.T) {
	s, err := fakeHost(t).ReadStats()
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stats{PagesShared: 7, PagesSharing: 70, FullScans: 3}) {
		t.Errorf("stats %+v", s)
	}
}
