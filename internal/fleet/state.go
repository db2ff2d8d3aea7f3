// Package fleet keeps long-lived fleets: the guests of a scenario started
// once and left running after the `vfleet fleet up` that started them
// exits, reached later to run commands in them, checked, and taken down.
//
// What later commands need to reach a fleet and take it down is in one
// small file per fleet, STATE_DIR/fleets/NAME.json. The fleet's resources
// themselves are in its run's ledger, STATE_DIR/ledger/KEY, like any run's.
package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// State is a fleet's state file.
type State struct {
	Name     string `json:"name"`
	RunID    int64  `json:"run_id"`
	RunKey   string `json:"run_key"` // names the run's ledger
	Scenario string `json:"scenario"`
	Source   string `json:"source"` // where the scenario came from
	// DB is the results database holding the fleet's run, so that the run
	// is finished where it was recorded whatever --db later commands get.
	DB      string    `json:"db"`
	Started time.Time `json:"started"`
	Guests  []Guest   `json:"guests"`
}

// Guest is one guest of a fleet, as its state file keeps it.
type Guest struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Runtime string `json:"runtime,omitempty"`
	// AgentAddr is the host-side unix socket of the guest's agent; empty
	// for a guest that cannot be reached (the network's peer).
	AgentAddr string `json:"agent_addr,omitempty"`
	PIDs      []int  `json:"pids,omitempty"`
}

// KindLabel is the guest's kind, with its runtime when it has one.
func (g Guest) KindLabel() string {
	if g.Runtime == "" {
		return g.Kind
	}
	return g.Kind + " (" + g.Runtime + ")"
}

var (
	// ErrExists: a state file of that name is already there.
	ErrExists = errors.New("a fleet of that name exists")
	// ErrNoFleet: there is no fleet of that name, or (no name) none at all.
	ErrNoFleet = errors.New("no such fleet")
	// ErrUsage marks the caller's mistakes: a name that is not allowed, or
	// none where several fleets are up.
	ErrUsage = errors.New("fleet: wrong name")
)

// noFleetError is ErrNoFleet saying which fleets there are.
type noFleetError struct {
	name   string
	others []string // the fleets there are
}

func (e noFleetError) Error() string {
	switch {
	case e.name == "":
		return "no fleet is up; start one with 'vfleet fleet up SCENARIO'"
	case len(e.others) == 0:
		return fmt.Sprintf("no such fleet %q (no fleet is up)", e.name)
	default:
		return fmt.Sprintf("no such fleet %q (fleets: %s)", e.name, strings.Join(e.others, ", "))
	}
}

func (noFleetError) Is(target error) bool { return target == ErrNoFleet }

// usageError is ErrUsage with its own message.
type usageError struct{ error }

func (usageError) Is(target error) bool { return target == ErrUsage }
func (e usageError) Unwrap() error      { return e.error }

// Fleet names become file names, so they are held to the rules of
// scenario names.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// CheckName refuses a name a fleet cannot have; the error is ErrUsage.
func CheckName(name string) error {
	if !nameRE.MatchString(name) || len(name) > 40 {
		return usageError{fmt.Errorf("fleet name %q is not allowed: want lower-case letters, digits and '-', at most 40 characters", name)}
	}
	return nil
}

// Dir holds the fleets of a state directory.
type Dir struct {
	stateDir string
	// warnings gets what is told without failing: a gone fleet's run that
	// could not be marked complete.
	warnings io.Writer
}

// At is the fleets of stateDir; warnings gets what is told without
// failing.
func At(stateDir string, warnings io.Writer) Dir { return Dir{stateDir: stateDir, warnings: warnings} }

func (d Dir) dir() string { return filepath.Join(d.stateDir, "fleets") }

func (d Dir) ledgerRoot() string { return filepath.Join(d.stateDir, "ledger") }

// Path is the state file of the fleet called name.
func (d Dir) Path(name string) string { return filepath.Join(d.dir(), name+".json") }

// Gone says whether every resource of the fleet whose run has runKey was
// removed: a ledger is deleted once each of its entries is undone.
func (d Dir) Gone(runKey string) bool {
	_, err := os.Stat(filepath.Join(d.ledgerRoot(), runKey))
	return errors.Is(err, fs.ErrNotExist)
}

// Publish writes a new fleet's state file. It appears whole or not at
// all, and never replaces another fleet's: it is written aside and then
// linked into place, which, unlike a rename, fails when the name is taken.
func (d Dir) Publish(s State) error {
	dir := d.dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+s.Name+".*.tmp")
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.Link(tmp.Name(), d.Path(s.Name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("fleet %s: %w (started meanwhile by another 'vfleet fleet up'?)", s.Name, ErrExists)
		}
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

// Read reads the state file of the fleet called name.
func (d Dir) Read(name string) (State, error) {
	if err := CheckName(name); err != nil {
		return State{}, err
	}
	b, err := os.ReadFile(d.Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		names, lerr := d.Names()
		if lerr != nil {
			return State{}, lerr
		}
		return State{}, noFleetError{name: name, others: names}
	}
	if err != nil {
		return State{}, fmt.Errorf("fleet %s: %w", name, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("fleet state %s: %w (remove the file and run 'vfleet clean' to remove the fleet)", d.Path(name), err)
	}
	return s, nil
}

// Names lists the fleets with a state file, sorted.
func (d Dir) Names() ([]string, error) {
	entries, err := os.ReadDir(d.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list fleets: %w", err)
	}
	var names []string
	for _, e := range entries {
		// Files being written start with a dot.
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(name, ".") && e.Type().IsRegular() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// List reads every fleet's state file, by name.
func (d Dir) List() ([]State, error) {
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	out := make([]State, 0, len(names))
	for _, n := range names {
		s, err := d.Read(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Resolve reads the named fleet; with no name, the only one there is.
func (d Dir) Resolve(name string) (State, error) {
	if name != "" {
		return d.Read(name)
	}
	names, err := d.Names()
	if err != nil {
		return State{}, err
	}
	switch len(names) {
	case 0:
		return State{}, noFleetError{}
	case 1:
		return d.Read(names[0])
	default:
		return State{}, usageError{fmt.Errorf("%d fleets are up (%s): name one", len(names), strings.Join(names, ", "))}
	}
}

// Remove removes a fleet's state file, if it is there.
func (d Dir) Remove(name string) error {
	if err := os.Remove(d.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove fleet state: %w", err)
	}
	return nil
}

// Guest finds a guest by name; the error lists the ones there are.
func (s State) Guest(name string) (Guest, error) {
	names := make([]string, 0, len(s.Guests))
	for _, g := range s.Guests {
		if g.Name == name {
			return g, nil
		}
		names = append(names, g.Name)
	}
	return Guest{}, fmt.Errorf("fleet %s has no guest %q (guests: %s)", s.Name, name, strings.Join(names, ", "))
}
