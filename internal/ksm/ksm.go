// Package ksm switches the kernel's same-page merging (KSM) on for the
// runs that ask for it and puts the host's own settings back when the last
// of them ends, even when a run died and `vfleet clean` ends it.
//
// KSM is host-wide, and several runs may want it at once: package hostset
// keeps the host's settings from before the first of them and puts them
// back after the last.
package ksm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/hostset"
	"github.com/vfleet/vfleet/internal/ledger"
)

// Where the kernel's KSM knobs are, and where the holds are kept.
const (
	SysDir    = "/sys/kernel/mm/ksm"
	StateFile = "/run/vfleet-ksm.json"
)

// ErrUnavailable says the kernel has no KSM.
var ErrUnavailable = errors.New("the kernel has no KSM (CONFIG_KSM): /sys/kernel/mm/ksm is missing")

// Scan rate while a run holds KSM on: 1000 pages every 20 ms, about
// 200 MB/s, ten times the kernel's default, so that a fleet's pages are
// merged within seconds to tens of seconds rather than minutes; ksmd's
// CPU is part of what merging costs, and a run that asks for it pays it.
const (
	pagesToScan    = "1000"
	sleepMillisecs = "20"
)

// knobs are the settings vfleet changes, in the order it writes them;
// they are put back in reverse, "run" last, so KSM stops only once its
// pace is the host's again.
var knobs = []hostset.Setting{
	{Name: "pages_to_scan", Value: pagesToScan},
	{Name: "sleep_millisecs", Value: sleepMillisecs},
	{Name: "run", Value: "1"},
}

// KindHold is the ledger kind of a run's hold on KSM; its ID is the
// holder, Data the knobs directory and state file.
const KindHold = "ksm"

func init() { ledger.RegisterUndo(KindHold, hostset.Undo) }

// Host is a KSM: its knobs' directory and the file of its holds.
type Host struct {
	Dir, State string
}

// System is this host's KSM.
var System = Host{Dir: SysDir, State: StateFile}

func (h Host) set() hostset.Set { return hostset.Set{Kind: KindHold, Dir: h.Dir, State: h.State} }

// Available says whether the kernel has KSM.
func (h Host) Available() error {
	if _, err := os.Stat(filepath.Join(h.Dir, "run")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ErrUnavailable
		}
		return err
	}
	return nil
}

// Settings describes what a hold sets, for a run's record.
func Settings() string {
	return fmt.Sprintf("run=1 pages_to_scan=%s sleep_millisecs=%s", pagesToScan, sleepMillisecs)
}

// Hold switches KSM on for holder (a run's ID) and records the hold in
// led, whose undo lets go of it. The first hold saves the host's
// settings; later ones find KSM on already.
func (h Host) Hold(ctx context.Context, led *ledger.Ledger, holder string) (ledger.Entry, error) {
	if err := h.Available(); err != nil {
		return ledger.Entry{}, err
	}
	entry, _, err := h.set().Hold(ctx, led, holder, knobs)
	if err != nil {
		return entry, fmt.Errorf("switch KSM on: %w", err)
	}
	return entry, nil
}

// Release lets go of holder's hold; when it was the last, the host's
// settings are put back and the state file removed. A holder that holds
// nothing is not an error.
func (h Host) Release(ctx context.Context, holder string) error {
	return h.set().Release(ctx, holder)
}

func (h Host) read(name string) (string, error) { return h.set().Read(name) }

// Stats are KSM's counters, in pages.
type Stats struct {
	// PagesShared is how many merged pages are kept, PagesSharing how
	// many more mappings use them: the pages saved.
	PagesShared, PagesSharing int64
	// FullScans counts ksmd's passes over every mergeable area.
	FullScans int64
}

// ReadStats reads KSM's counters.
func (h Host) ReadStats() (Stats, error) {
	var s Stats
	for _, c := range []struct {
		name string
		dst  *int64
	}{{"pages_shared", &s.PagesShared}, {"pages_sharing", &s.PagesSharing}, {"full_scans", &s.FullScans}} {
		v, err := h.read(c.name)
		if err != nil {
			return Stats{}, err
		}
		if *c.dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Stats{}, fmt.Errorf("KSM's %s %q: %w", c.name, v, err)
		}
	}
	return s, nil
}

// WaitScans waits until ksmd has made n more full passes than it had at
// from, or ctx ends; merging settles after two.
func (h Host) WaitScans(ctx context.Context, from Stats, n int64) (Stats, error) {
	for {
		s, err := h.ReadStats()
		if err != nil || s.FullScans >= from.FullScans+n {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
