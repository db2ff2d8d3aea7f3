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
	Machine      string // hostinfo.Fingerprint.Machine of the run when it was set
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Baseline{}, fmt.Errorf("set baseline run %d: %w", runID, err)
	}
	defer tx.Rollback()
	// A row of this machine kept under another name (its host name alone,
	// before machines were named by more) is replaced too.
	old, err := sameMachineBaselines(ctx, tx, b.ScenarioName, fp)
	if err != nil {
		return Baseline{}, err
	}
	for _, o := range old {
		if o.Machine == b.Machine {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM baselines WHERE scenario_name = ? AND machine = ?`, o.ScenarioName, o.Machine); err != nil {
			return Baseline{}, fmt.Errorf("replace baseline of scenario %s on %s: %w", o.ScenarioName, o.Machine, err)
		}
	}
	// The status is checked again in the write, so that a run cannot
	// become the baseline while something else marks it otherwise.
	res, err := tx.ExecContext(ctx, `INSERT INTO baselines (scenario_name, machine, run_id, set_ns)
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
	if err := tx.Commit(); err != nil {
		return Baseline{}, fmt.Errorf("set baseline run %d: %w", runID, err)
	}
	return b, nil
}

// GetBaseline returns the baseline of a scenario on the machine fp was
// measured on. The baseline run's own fingerprint decides
// (hostinfo.Fingerprint.SameMachine), not the name stored beside it, so a
// baseline set when a machine was named by its host name alone is found
// as long as that run's host name, architecture and CPU are this one's.
func (s *Store) GetBaseline(ctx context.Context, scenario string, fp hostinfo.Fingerprint) (Baseline, error) {
	found, err := sameMachineBaselines(ctx, s.db, scenario, fp)
	if err != nil {
		return Baseline{}, err
	}
	if len(found) == 0 {
		return Baseline{}, fmt.Errorf("baseline of scenario %s on %s: %w", scenario, fp.Machine(), ErrNotFound)
	}
	// Under its own name first, else the one set last.
	best := found[0]
	for _, b := range found[1:] {
		if b.Machine == fp.Machine() || best.Machine != fp.Machine() && b.Set.After(best.Set) {
			best = b
		}
	}
	return best, nil
}

// querier is what reading baselines needs of a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sameMachineBaselines are the baselines of a scenario whose runs were
// measured on the machine fp was.
func sameMachineBaselines(ctx context.Context, q querier, scenario string, fp hostinfo.Fingerprint) ([]Baseline, error) {
	rows, err := q.QueryContext(ctx, `SELECT b.machine, b.run_id, b.set_ns, r.host_json FROM baselines b
		JOIN runs r ON r.id = b.run_id WHERE b.scenario_name = ?`, scenario)
	if err != nil {
		return nil, fmt.Errorf("read baselines of scenario %s: %w", scenario, err)
	}
	defer rows.Close()
	var out []Baseline
	for rows.Next() {
		b := Baseline{ScenarioName: scenario}
		var set int64
		var host string
		if err := rows.Scan(&b.Machine, &b.RunID, &set, &host); err != nil {
			return nil, fmt.Errorf("read baselines of scenario %s: %w", scenario, err)
		}
		var h hostinfo.Fingerprint
		if err := json.Unmarshal([]byte(host), &h); err != nil {
			return nil, fmt.Errorf("read run %d host: %w", b.RunID, err)
		}
		if h.SameMachine(fp) {
			b.Set = fromNS(set)
			out = append(out, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read baselines of scenario %s: %w", scenario, err)
	}
	return out, nil
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
