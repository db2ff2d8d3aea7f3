package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A fleet outlives the `vfleet fleet up` that started it; what later
// commands need to reach it and take it down is in one small file per
// fleet, STATE_DIR/fleets/NAME.json. The fleet's resources themselves are
// in its run's ledger, STATE_DIR/ledger/KEY, like any run's.

// fleetState is a fleet's state file.
type fleetState struct {
	Name     string `json:"name"`
	RunID    int64  `json:"run_id"`
	RunKey   string `json:"run_key"` // names the run's ledger
	Scenario string `json:"scenario"`
	Source   string `json:"source"` // where the scenario came from
	// DB is the results database holding the fleet's run, so that the run
	// is finished where it was recorded whatever --db later commands get.
	DB      string       `json:"db"`
	Started time.Time    `json:"started"`
	Guests  []fleetGuest `json:"guests"`
}

type fleetGuest struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Runtime string `json:"runtime,omitempty"`
	// AgentAddr is the host-side unix socket of the guest's agent; empty
	// for a guest that cannot be reached (the network's peer).
	AgentAddr string `json:"agent_addr,omitempty"`
	PIDs      []int  `json:"pids,omitempty"`
}

func (g fleetGuest) kindLabel() string {
	if g.Runtime == "" {
		return g.Kind
	}
	return g.Kind + " (" + g.Runtime + ")"
}

// errFleetExists: a state file of that name is already there.
var errFleetExists = errors.New("a fleet of that name exists")

// noFleetError: there is no fleet of that name, or (no name) none at all.
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

// Fleet names become file names, so they are held to the rules of
// scenario names.
var fleetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func checkFleetName(name string) error {
	if !fleetNameRE.MatchString(name) || len(name) > 40 {
		return fmt.Errorf("fleet name %q is not allowed: want lower-case letters, digits and '-', at most 40 characters", name)
	}
	return nil
}

func fleetsDir(stateDir string) string { return filepath.Join(stateDir, "fleets") }

func ledgerRoot(stateDir string) string { return filepath.Join(stateDir, "ledger") }

func fleetPath(dir, name string) string { return filepath.Join(dir, name+".json") }

// fleetGone says whether every resource of the fleet whose run has runKey
// was removed: a ledger is deleted once each of its entries is undone.
func fleetGone(stateDir, runKey string) bool {
	_, err := os.Stat(filepath.Join(ledgerRoot(stateDir), runKey))
	return errors.Is(err, fs.ErrNotExist)
}

// publishFleet writes a new fleet's state file. It appears whole or not at
// all, and never replaces another fleet's: it is written aside and then
// linked into place, which, unlike a rename, fails when the name is taken.
func publishFleet(dir string, s fleetState) error {
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
	if err := os.Link(tmp.Name(), fleetPath(dir, s.Name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("fleet %s: %w (started meanwhile by another 'vfleet fleet up'?)", s.Name, errFleetExists)
		}
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

func readFleet(dir, name string) (fleetState, error) {
	if err := checkFleetName(name); err != nil {
		return fleetState{}, usageError{err}
	}
	b, err := os.ReadFile(fleetPath(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		names, lerr := fleetNames(dir)
		if lerr != nil {
			return fleetState{}, lerr
		}
		return fleetState{}, noFleetError{name: name, others: names}
	}
	if err != nil {
		return fleetState{}, fmt.Errorf("fleet %s: %w", name, err)
	}
	var s fleetState
	if err := json.Unmarshal(b, &s); err != nil {
		return fleetState{}, fmt.Errorf("fleet state %s: %w (remove the file and run 'vfleet clean' to remove the fleet)", fleetPath(dir, name), err)
	}
	return s, nil
}

// fleetNames lists the fleets with a state file, sorted.
func fleetNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
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

func listFleets(dir string) ([]fleetState, error) {
	names, err := fleetNames(dir)
	if err != nil {
		return nil, err
	}
	out := make([]fleetState, 0, len(names))
	for _, n := range names {
		s, err := readFleet(dir, n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// resolveFleet reads the named fleet; with no name, the only one there is.
func resolveFleet(dir, name string) (fleetState, error) {
	if name != "" {
		return readFleet(dir, name)
	}
	names, err := fleetNames(dir)
	if err != nil {
		return fleetState{}, err
	}
	switch len(names) {
	case 0:
		return fleetState{}, noFleetError{}
	case 1:
		return readFleet(dir, names[0])
	default:
		return fleetState{}, usageError{fmt.Errorf("%d fleets are up (%s): name one", len(names), strings.Join(names, ", "))}
	}
}

func removeFleet(dir, name string) error {
	if err := os.Remove(fleetPath(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove fleet state: %w", err)
	}
	return nil
}

// guest finds a guest by name; the error lists the ones there are.
func (s fleetState) guest(name string) (fleetGuest, error) {
	names := make([]string, 0, len(s.Guests))
	for _, g := range s.Guests {
		if g.Name == name {
			return g, nil
		}
		names = append(names, g.Name)
	}
	return fleetGuest{}, fmt.Errorf("fleet %s has no guest %q (guests: %s)", s.Name, name, strings.Join(names, ", "))
}
