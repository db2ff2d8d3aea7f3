package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/procfs"
)

// RunSummary is one line of the run list.
type RunSummary struct {
	ID           int64
	ScenarioName string
	Started      time.Time
	Finished     time.Time // zero while running or after an interruption
	Status       string
	StatusReason string
	Samples      int
	Failures     int
	Origin       string // where it was measured when not here (Run.Origin)
}

// CreateRun records a new run with status running, before its first step,
// and returns its id (also set in r.ID). An empty ScenarioHash is computed
// from ScenarioText; a given one must match it.
func (s *Store) CreateRun(ctx context.Context, r *Run) (int64, error) {
	hash, err := scenarioHash(r.ScenarioText, r.ScenarioHash)
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	host, err := json.Marshal(r.Host)
	if err != nil {
		return 0, fmt.Errorf("create run: encode host: %w", err)
	}
	guests, err := json.Marshal(r.Guests)
	if err != nil {
		return 0, fmt.Errorf("create run: encode guests: %w", err)
	}
	dropped, err := json.Marshal(r.Dropped)
	if err != nil {
		return 0, fmt.Errorf("create run: encode dropped groups: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs
		(scenario_name, scenario_source, scenario_text, scenario_hash, baseline, started_ns, finished_ns, status, host_json, guests_json,
		 run_key, owner_pid, owner_start, dropped_json, origin)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ScenarioName, r.ScenarioSource, r.ScenarioText, hash, r.Baseline,
		toNS(r.Started), toNS(r.Finished), StatusRunning, string(host), string(guests),
		r.Key, r.Owner.PID, int64(r.Owner.StartTime), string(dropped), r.Origin)
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	r.ID, r.ScenarioHash, r.Status = id, hash, StatusRunning
	return id, nil
}

func scenarioHash(text []byte, given string) (string, error) {
	sum := sha256.Sum256(text)
	want := hex.EncodeToString(sum[:])
	if given != "" && given != want {
		return "", fmt.Errorf("%w: got %s, the text hashes to %s", ErrHashMismatch, given, want)
	}
	return want, nil
}

// SetRunGuests records what the run's guests were, once they are up.
func (s *Store) SetRunGuests(ctx context.Context, id int64, guests map[string]GuestRecord) error {
	b, err := json.Marshal(guests)
	if err != nil {
		return fmt.Errorf("run %d: encode guests: %w", id, err)
	}
	return s.updateRun(ctx, id, `UPDATE runs SET guests_json = ? WHERE id = ?`, string(b), id)
}

// SetRunHost records the host as the run measured it, when the run itself
// changed its settings after it was created.
func (s *Store) SetRunHost(ctx context.Context, id int64, host hostinfo.Fingerprint) error {
	b, err := json.Marshal(host)
	if err != nil {
		return fmt.Errorf("run %d: encode host: %w", id, err)
	}
	return s.updateRun(ctx, id, `UPDATE runs SET host_json = ? WHERE id = ?`, string(b), id)
}

// SetRunKey records the key that names the run's resources and ledger,
// which is made from its id.
func (s *Store) SetRunKey(ctx context.Context, id int64, key string) error {
	return s.updateRun(ctx, id, `UPDATE runs SET run_key = ? WHERE id = ?`, key, id)
}

// SetRunOwner records the process that now answers for a running run; the
// zero Process hands it to a long-lived fleet, which has no process.
func (s *Store) SetRunOwner(ctx context.Context, id int64, owner procfs.Process) error {
	return s.updateRun(ctx, id, `UPDATE runs SET owner_pid = ?, owner_start = ? WHERE id = ?`, owner.PID, int64(owner.StartTime), id)
}

// FinishRun records the end of a run, its final status and why it ended
// so (empty for a complete run).
func (s *Store) FinishRun(ctx context.Context, id int64, status, reason string, finished time.Time) error {
	return s.updateRun(ctx, id, `UPDATE runs SET status = ?, status_reason = ?, finished_ns = ? WHERE id = ?`,
		status, reason, toNS(finished), id)
}

// RunningRuns lists the runs still marked running, with their keys and
// owners, so that a caller can find those whose vfleet died.
func (s *Store) RunningRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, scenario_name, run_key, owner_pid, owner_start FROM runs WHERE status = ? ORDER BY id`, StatusRunning)
	if err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r := Run{Status: StatusRunning}
		var start int64
		if err := rows.Scan(&r.ID, &r.ScenarioName, &r.Key, &r.Owner.PID, &start); err != nil {
			return nil, fmt.Errorf("list running runs: %w", err)
		}
		r.Owner.StartTime = uint64(start)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	return out, nil
}

// AbortRun marks a run whose vfleet died as aborted, keeping its samples.
// It changes nothing, and says so with false, when the run has ended in
// the meantime.
func (s *Store) AbortRun(ctx context.Context, id int64, reason string, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, status_reason = ?, finished_ns = ? WHERE id = ? AND status = ?`,
		StatusAborted, reason, toNS(at), id, StatusRunning)
	if err != nil {
		return false, fmt.Errorf("abort run %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("abort run %d: %w", id, err)
	}
	return n == 1, nil
}

func (s *Store) updateRun(ctx context.Context, id int64, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	return nil
}

// GetRun returns one run with its provenance.
func (s *Store) GetRun(ctx context.Context, id int64) (Run, error) {
	var r Run
	var started, finished int64
	var host, guests, dropped string
	var ownerStart int64
	err := s.db.QueryRowContext(ctx, `SELECT id, scenario_name, scenario_source, scenario_text, scenario_hash, baseline,
		started_ns, finished_ns, status, status_reason, run_key, owner_pid, owner_start, host_json, guests_json, dropped_json, origin
		FROM runs WHERE id = ?`, id).
		Scan(&r.ID, &r.ScenarioName, &r.ScenarioSource, &r.ScenarioText, &r.ScenarioHash, &r.Baseline,
			&started, &finished, &r.Status, &r.StatusReason, &r.Key, &r.Owner.PID, &ownerStart, &host, &guests, &dropped, &r.Origin)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("read run %d: %w", id, err)
	}
	r.Started, r.Finished, r.Owner.StartTime = fromNS(started), fromNS(finished), uint64(ownerStart)
	if err := json.Unmarshal([]byte(host), &r.Host); err != nil {
		return Run{}, fmt.Errorf("read run %d host: %w", id, err)
	}
	if err := json.Unmarshal([]byte(guests), &r.Guests); err != nil {
		return Run{}, fmt.Errorf("read run %d guests: %w", id, err)
	}
	if err := json.Unmarshal([]byte(dropped), &r.Dropped); err != nil {
		return Run{}, fmt.Errorf("read run %d dropped groups: %w", id, err)
	}
	return r, nil
}

// ListRuns lists every run, oldest first.
func (s *Store) ListRuns(ctx context.Context) ([]RunSummary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.scenario_name, r.started_ns, r.finished_ns, r.status, r.status_reason, r.origin,
		(SELECT COUNT(*) FROM samples WHERE run_id = r.id),
		(SELECT COUNT(*) FROM failures WHERE run_id = r.id)
		FROM runs r ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []RunSummary
	for rows.Next() {
		var r RunSummary
		var started, finished int64
		if err := rows.Scan(&r.ID, &r.ScenarioName, &started, &finished, &r.Status, &r.StatusReason, &r.Origin, &r.Samples, &r.Failures); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		r.Started, r.Finished = fromNS(started), fromNS(finished)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// ResolveRun turns a user's reference, a run id or "latest", into the id
// of a stored run.
func (s *Store) ResolveRun(ctx context.Context, ref string) (int64, error) {
	if ref == "latest" {
		var id sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(id) FROM runs`).Scan(&id); err != nil {
			return 0, fmt.Errorf("find latest run: %w", err)
		}
		if !id.Valid {
			return 0, fmt.Errorf("latest run: %w: no runs stored yet in %s", ErrNotFound, s.path)
		}
		return id.Int64, nil
	}
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("run %q: %w (give a run id from 'vfleet runs' or \"latest\")", ref, ErrNotFound)
	}
	var one int
	err = s.db.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("run %d: %w in %s (list the stored runs with 'vfleet runs')", id, ErrNotFound, s.path)
	}
	if err != nil {
		return 0, fmt.Errorf("find run %d: %w", id, err)
	}
	return id, nil
}
