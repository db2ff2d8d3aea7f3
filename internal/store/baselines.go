package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

// ErrNotComplete is returned for a run that cannot be a baseline because
// it did not measure everything: one still running, interrupted or with
// failed steps would make every later run look changed where it lacks
// samples.
var ErrNotComplete = errors.New("run is not complete")

// Baseline is the run a scenario's later runs on one machine are compared
// with.
type Baseline struct {
	ScenarioName string
	Machine      string // hostinfo.Fingerprint.Machine of the run
	RunID        int64
	Set          time.Time
}

// SetBaseline makes a complete run the baseline of its scenario on the
// machine it ran on, replacing the one set before, and returns it.
func (s *Store) SetBaseline(ctx context.Context, runID int64, at time.Time) (Baseline, error) {
	b := Baseline{RunID: runID, Set: at}
	var status, host string
	err := s.db.QueryRowContext(ctx, `SELECT scenario_name, status, host_json FROM runs WHERE id = ?`, runID).Scan(&b.ScenarioName, &status, &host)
	if errors.Is(err, sql.ErrNoRows) {
		return Baseline{}, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Baseline{}, fmt.Errorf("read run %d: %w", runID, err)
	}
	if status != StatusComplete {
		return Baseline{}, fmt.Errorf("run %d is %s: %w", runID, status, ErrNotComplete)
	}
	var fp hostinfo.Fingerprint
	if err := json.Unmarshal([]byte(host), &fp); err != nil {
		return Baseline{}, fmt.Errorf("read run %d host: %w", runID, err)
	}
	b.Machine = fp.Machine()
	// The status is checked again in the write, so that a run cannot
	// become the baseline while something else marks it otherwise.
	res, err := s.db.ExecContext(ctx, `INSERT INTO baselines (scenario_name, machine, run_id, set_ns)
		SELECT ?, ?, id, ? FROM runs WHERE id = ? AND status = ?
		ON CONFLICT (scenario_name, machine) DO UPDATE SET run_id = excluded.run_id, set_ns = excluded.set_ns`,
		b.ScenarioName, b.Machine, toNS(at), runID, StatusComplete)
	if err != nil {
		return Baseline{}, fmt.Errorf("set baseline run %d: %w", runID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Baseline{}, fmt.Errorf("set baseline run %d: %w", runID, err)
	}
	if n != 1 {
		return Baseline{}, fmt.Errorf("run %d has ended otherwise meanwhile: %w", runID, ErrNotComplete)
	}
	return b, nil
}

// GetBaseline returns the baseline of a scenario on a machine.
func (s *Store) GetBaseline(ctx context.Context, scenario, machine string) (Baseline, error) {
	b := Baseline{ScenarioName: scenario, Machine: machine}
	var set int64
	err := s.db.QueryRowContext(ctx, `SELECT run_id, set_ns FROM baselines WHERE scenario_name = ? AND machine = ?`, scenario, machine).Scan(&b.RunID, &set)
	if errors.Is(err, sql.ErrNoRows) {
		return Baseline{}, fmt.Errorf("baseline of scenario %s on %s: %w", scenario, machine, ErrNotFound)
	}
	if err != nil {
		return Baseline{}, fmt.Errorf("read baseline of scenario %s on %s: %w", scenario, machine, err)
	}
	b.Set = fromNS(set)
	return b, nil
}

// Baselines lists the baselines set, of every scenario or of one (scenario
// not empty), by scenario then machine.
func (s *Store) Baselines(ctx context.Context, scenario string) ([]Baseline, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT scenario_name, machine, run_id, set_ns FROM baselines
		WHERE ? = '' OR scenario_name = ? ORDER BY scenario_name, machine`, scenario, scenario)
	if err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	defer rows.Close()
	var out []Baseline
	for rows.Next() {
		var b Baseline
		var set int64
		if err := rows.Scan(&b.ScenarioName, &b.Machine, &b.RunID, &set); err != nil {
			return nil, fmt.Errorf("list baselines: %w", err)
		}
		b.Set = fromNS(set)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	return out, nil
}

// UnsetBaseline forgets the baseline of a scenario on a machine; the run
// itself stays. ErrNotFound when there was none.
func (s *Store) UnsetBaseline(ctx context.Context, scenario, machine string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM baselines WHERE scenario_name = ? AND machine = ?`, scenario, machine)
	if err != nil {
		return fmt.Errorf("unset baseline of scenario %s on %s: %w", scenario, machine, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("unset baseline of scenario %s on %s: %w", scenario, machine, err)
	}
	if n == 0 {
		return fmt.Errorf("baseline of scenario %s on %s: %w", scenario, machine, ErrNotFound)
	}
	return nil
}
