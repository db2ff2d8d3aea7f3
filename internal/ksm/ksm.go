// Package ksm switches the kernel's same-page merging (KSM) on for the
// runs that ask for it and puts the host's own settings back when the last
// of them ends, even when a run died and `vfleet clean` ends it.
//
// KSM is host-wide, and several runs may want it at once: the settings
// the host had before the first of them are kept in a state file with the
// list of runs holding KSM on, under a lock. The file lives in /run, a
// tmpfs, because a reboot resets KSM to the kernel's defaults too: after
// one, there is nothing to put back.
package ksm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/flock"
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
var knobs = []struct{ name, value string }{
	{"pages_to_scan", pagesToScan},
	{"sleep_millisecs", sleepMillisecs},
	{"run", "1"},
}

// KindHold is the ledger kind of a run's hold on KSM; its ID is the
// holder, Data the knobs directory and state file.
const KindHold = "ksm"

func init() { ledger.RegisterUndo(KindHold, undoHold) }

// Host is a KSM: its knobs' directory and the file of its holds.
type Host struct {
	Dir, State string
}

// System is this host's KSM.
var System = Host{Dir: SysDir, State: StateFile}

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

// state is the state file: the host's settings before the first hold, and
// who holds KSM on now.
type state struct {
	Saved   map[string]string `json:"saved"`
	Holders []string          `json:"holders"`
}

// Hold switches KSM on for holder (a run's ID) and records the hold in
// led, whose undo lets go of it. The first hold saves the host's
// settings; later ones find KSM on already.
func (h Host) Hold(ctx context.Context, led *ledger.Ledger, holder string) (ledger.Entry, error) {
	if err := h.Available(); err != nil {
		return ledger.Entry{}, err
	}
	// Recorded before anything changes: a crash in between leaves an
	// entry whose undo finds nothing to do, never a change unrecorded.
	entry, err := led.Record(KindHold, holder, map[string]string{"dir": h.Dir, "state": h.State})
	if err != nil {
		return ledger.Entry{}, err
	}
	err = h.locked(ctx, func(st *state) error {
		if st.Saved == nil {
			saved := map[string]string{}
			for _, k := range knobs {
				v, err := h.read(k.name)
				if err != nil {
					return err
				}
				saved[k.name] = v
			}
			st.Saved = saved
		}
		if !slices.Contains(st.Holders, holder) {
			st.Holders = append(st.Holders, holder)
		}
		// The state file is written (by locked, after this) even when a
		// knob fails, so that the undo puts back what was changed.
		for _, k := range knobs {
			if err := h.write(k.name, k.value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return entry, fmt.Errorf("switch KSM on: %w", err)
	}
	return entry, nil
}

// Release lets go of holder's hold; when it was the last, the host's
// settings are put back and the state file removed. A holder that holds
// nothing is not an error.
func (h Host) Release(ctx context.Context, holder string) error {
	return h.locked(ctx, func(st *state) error {
		st.Holders = slices.DeleteFunc(st.Holders, func(s string) bool { return s == holder })
		if len(st.Holders) > 0 || st.Saved == nil {
			return nil
		}
		var errs []error
		for _, k := range slices.Backward(knobs) {
			if v, ok := st.Saved[k.name]; ok {
				errs = append(errs, h.write(k.name, v))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("put KSM's settings back: %w", err)
		}
		st.Saved = nil
		return nil
	})
}

func undoHold(ctx context.Context, e ledger.Entry) error {
	return Host{Dir: e.Data["dir"], State: e.Data["state"]}.Release(ctx, e.ID)
}

// locked runs fn on the state under the state file's lock and writes back
// what fn left, or removes the file when nothing is held and nothing saved.
func (h Host) locked(ctx context.Context, fn func(*state) error) error {
	unlock, err := flock.Lock(ctx, h.State+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	var st state
	b, err := os.ReadFile(h.State)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("%s: %w", h.State, err)
		}
	}
	fnErr := fn(&st)
	if st.Saved == nil && len(st.Holders) == 0 {
		if err := os.Remove(h.State); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(fnErr, err)
		}
		return fnErr
	}
	out, _ := json.Marshal(st) // strings only: cannot fail
	tmp := h.State + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return errors.Join(fnErr, err)
	}
	return errors.Join(fnErr, os.Rename(tmp, h.State))
}

func (h Host) read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(h.Dir, name))
	if err != nil {
		return "", fmt.Errorf("read KSM's %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (h Host) write(name, value string) error {
	if err := os.WriteFile(filepath.Join(h.Dir, name), []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("set KSM's %s to %s: %w", name, value, err)
	}
	return nil
}

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
