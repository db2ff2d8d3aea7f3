// Package hostset changes host-wide kernel settings (files under /proc or
// /sys) for the runs that ask for them, and puts the host's own back when
// the last of them ends, even when a run died and `vfleet clean` ends it.
//
// Several runs may hold a set at once: the values the host had before the
// first of them are kept in a state file with the list of runs holding the
// set, under a lock. State files live in /run, a tmpfs, because a reboot
// resets these settings too: after one, there is nothing to put back.
package hostset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/flock"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/regfile"
)

// Set is a group of settings, files under Dir, held together.
type Set struct {
	// Kind is the ledger kind of a run's hold; the package that defines
	// the set registers Undo for it.
	Kind string
	Dir  string
	// State is the file of the holds; its lock is State+".lock".
	State string
}

// Setting is a file under the set's Dir and the value a hold writes to it.
type Setting struct {
	Name, Value string
	// Optional settings that the kernel refuses to show or to change are
	// left as they are and named by Hold, rather than failing it (an
	// interrupt whose affinity cannot be moved).
	Optional bool
}

// state is the state file: the host's values before the first hold (and
// the order they were written in, to put them back in reverse), the
// values held, and who holds them.
type state struct {
	Saved   map[string]string `json:"saved"`
	Order   []string          `json:"order,omitempty"`
	Held    map[string]string `json:"held,omitempty"`
	Holders []string          `json:"holders"`
}

// ErrConflict says another run holds the set at other values.
var ErrConflict = errors.New("held by another run at other values")

// Hold writes settings for holder (a run's ID), in order, and records the
// hold in led, whose undo lets go of it. The first hold saves the host's
// values; a later one must ask for the same values. It returns the
// optional settings the kernel refused.
func (s Set) Hold(ctx context.Context, led *ledger.Ledger, holder string, settings []Setting) (ledger.Entry, []string, error) {
	// Recorded before anything changes: a crash in between leaves an
	// entry whose undo finds nothing to do, never a change unrecorded.
	entry, err := led.Record(s.Kind, holder, map[string]string{"dir": s.Dir, "state": s.State})
	if err != nil {
		return ledger.Entry{}, nil, err
	}
	var refused []string
	err = s.locked(ctx, func(st *state) error {
		if len(st.Holders) > 0 && st.Held != nil {
			for _, set := range settings {
				if v, ok := st.Held[set.Name]; ok && v != set.Value {
					return fmt.Errorf("%s: %w (%s, by %s)", set.Name, ErrConflict, v, strings.Join(st.Holders, ", "))
				}
			}
		}
		if st.Saved == nil {
			st.Saved = map[string]string{}
		}
		if st.Held == nil {
			st.Held = map[string]string{}
		}
		if !slices.Contains(st.Holders, holder) {
			st.Holders = append(st.Holders, holder)
		}
		// The state file is written (by locked, after this) even when a
		// setting fails, so that the undo puts back what was changed.
		for _, set := range settings {
			_, saved := st.Saved[set.Name]
			if !saved {
				v, err := s.Read(set.Name)
				if err != nil && set.Optional {
					refused = append(refused, set.Name)
					continue
				}
				if err != nil {
					return err
				}
				st.Saved[set.Name] = v
				st.Order = append(st.Order, set.Name)
			}
			if err := s.write(set.Name, set.Value); err != nil {
				// Unchanged, so nothing to put back.
				if !saved {
					delete(st.Saved, set.Name)
					st.Order = st.Order[:len(st.Order)-1]
				}
				if !set.Optional {
					return err
				}
				refused = append(refused, set.Name)
				continue
			}
			st.Held[set.Name] = set.Value
		}
		return nil
	})
	return entry, refused, err
}

// Release lets go of holder's hold; when it was the last, the host's
// values are put back, in the reverse of the order they were changed in,
// and the state file removed. A holder that holds nothing is not an error.
func (s Set) Release(ctx context.Context, holder string) error {
	return s.locked(ctx, func(st *state) error {
		st.Holders = slices.DeleteFunc(st.Holders, func(h string) bool { return h == holder })
		if len(st.Holders) > 0 || st.Saved == nil {
			return nil
		}
		order := st.Order
		if order == nil {
			// A state file from before the order was kept.
			order = slices.Sorted(func(yield func(string) bool) {
				for k := range st.Saved {
					if !yield(k) {
						return
					}
				}
			})
		}
		var errs []error
		for _, name := range slices.Backward(order) {
			if v, ok := st.Saved[name]; ok {
				errs = append(errs, s.write(name, v))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("put the host's settings back: %w", err)
		}
		st.Saved, st.Order, st.Held = nil, nil, nil
		return nil
	})
}

// Undo is the ledger undo of every set's hold.
func Undo(ctx context.Context, e ledger.Entry) error {
	return Set{Kind: e.Kind, Dir: e.Data["dir"], State: e.Data["state"]}.Release(ctx, e.ID)
}

// locked runs fn on the state under the state file's lock and writes back
// what fn left, or removes the file when nothing is held and nothing saved.
func (s Set) locked(ctx context.Context, fn func(*state) error) error {
	unlock, err := flock.Lock(ctx, s.State+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	var st state
	b, err := os.ReadFile(s.State)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("%s: %w", s.State, err)
		}
	}
	fnErr := fn(&st)
	if st.Saved == nil && len(st.Holders) == 0 {
		if err := os.Remove(s.State); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(fnErr, err)
		}
		return fnErr
	}
	out, _ := json.Marshal(st) // strings only: cannot fail
	return errors.Join(fnErr, regfile.WriteFile(s.State, out, 0o600))
}

// Read returns a setting's current value.
func (s Set) Read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, name))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Join(s.Dir, name), err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (s Set) write(name, value string) error {
	if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("set %s to %s: %w", filepath.Join(s.Dir, name), value, err)
	}
	return nil
}
