package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/vfleet/vfleet/internal/workload"
)

var (
	// ErrNotFound is returned for a run that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew is returned for a database written by a newer vfleet.
	ErrSchemaTooNew = errors.New("database schema is newer than this vfleet")
)

// migrations are applied in order; migration i brings the schema to
// version i+1. Never edit one that has shipped: append a new one.
var migrations = []string{
	`CREATE TABLE runs (
		id              INTEGER PRIMARY KEY AUTOINCREMENT,
		scenario_name   TEXT NOT NULL,
		scenario_source TEXT NOT NULL,
		scenario_text   BLOB NOT NULL,
		scenario_hash   TEXT NOT NULL,
		baseline        TEXT NOT NULL,
		started_ns      INTEGER NOT NULL,
		finished_ns     INTEGER NOT NULL DEFAULT 0,
		status          TEXT NOT NULL,
		host_json       TEXT NOT NULL,
		guests_json     TEXT NOT NULL DEFAULT '{}'
	);
	CREATE TABLE samples (
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id      INTEGER NOT NULL REFERENCES runs(id),
		guest       TEXT NOT NULL,
		grp         TEXT NOT NULL,
		kind        TEXT NOT NULL,
		runtime     TEXT NOT NULL,
		workload_id TEXT NOT NULL,
		workload    TEXT NOT NULL,
		params_json TEXT NOT NULL,
		repetition  INTEGER NOT NULL,
		metric      TEXT NOT NULL,
		unit        TEXT NOT NULL,
		value       REAL NOT NULL,
		better      TEXT NOT NULL,
		at_ns       INTEGER NOT NULL,
		wall_ns     INTEGER NOT NULL,
		cpu_ns      INTEGER NOT NULL
	);
	CREATE INDEX samples_by_run ON samples(run_id, id);
	CREATE TABLE failures (
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id      INTEGER NOT NULL REFERENCES runs(id),
		guest       TEXT NOT NULL,
		grp         TEXT NOT NULL,
		workload_id TEXT NOT NULL,
		repetition  INTEGER NOT NULL,
		error       TEXT NOT NULL,
		stderr      TEXT NOT NULL,
		at_ns       INTEGER NOT NULL
	);
	CREATE INDEX failures_by_run ON failures(run_id, id);`,
}

// Store is an open results database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open results database: %w", err)
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	// One connection: SQLite serialises writers anyway, and a single
	// connection makes the pragmas below apply to every statement.
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	return s, nil
}

// ErrNotDatabase is returned when the file exists but is not SQLite.
var ErrNotDatabase = errors.New("not a vfleet results database")

// checkHeader refuses an existing non-empty file that is not SQLite before
// the driver touches it, so a mistyped --db cannot damage another file.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open results database: %w", err)
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	if n == 0 || string(head[:n]) == sqliteMagic {
		return nil
	}
	return fmt.Errorf("%s: %w (it is not an SQLite file)", path, ErrNotDatabase)
}

const sqliteMagic = "SQLite format 3\x00"

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file.
func (s *Store) Path() string { return s.path }

func (s *Store) migrate() error {
	if _, err := s.db.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ns INTEGER NOT NULL)`); err != nil {
		return err
	}
	var current int
	if err := s.db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: it has schema version %d, this vfleet knows up to %d", ErrSchemaTooNew, current, len(migrations))
	}
	for v := current; v < len(migrations); v++ {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations(version, applied_ns) VALUES (?, ?)`, v+1, time.Now().UnixNano()); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func toNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// CreateRun records a new run and returns its id.
func (s *Store) CreateRun(ctx context.Context, r *Run) (int64, error) {
	host, err := json.Marshal(r.Host)
	if err != nil {
		return 0, err
	}
	guests, err := json.Marshal(orEmpty(r.Guests))
	if err != nil {
		return 0, err
	}
	status := r.Status
	if status == "" {
		status = StatusRunning
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs
		(scenario_name, scenario_source, scenario_text, scenario_hash, baseline, started_ns, finished_ns, status, host_json, guests_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ScenarioName, r.ScenarioSource, r.ScenarioText, r.ScenarioHash, r.Baseline,
		toNS(r.Started), toNS(r.Finished), status, string(host), string(guests))
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	r.ID, r.Status = id, status
	return id, nil
}

func orEmpty(m map[string]GuestRecord) map[string]GuestRecord {
	if m == nil {
		return map[string]GuestRecord{}
	}
	return m
}

// SetRunGuests records what the run's guests were.
func (s *Store) SetRunGuests(ctx context.Context, id int64, guests map[string]GuestRecord) error {
	b, err := json.Marshal(orEmpty(guests))
	if err != nil {
		return err
	}
	return s.updateRun(ctx, id, `UPDATE runs SET guests_json = ? WHERE id = ?`, string(b), id)
}

// FinishRun records the end of a run and its final status.
func (s *Store) FinishRun(ctx context.Context, id int64, status string, finished time.Time) error {
	return s.updateRun(ctx, id, `UPDATE runs SET status = ?, finished_ns = ? WHERE id = ?`, status, toNS(finished), id)
}

func (s *Store) updateRun(ctx context.Context, id int64, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	return nil
}

// GetRun returns one run.
func (s *Store) GetRun(ctx context.Context, id int64) (Run, error) {
	var r Run
	var started, finished int64
	var host, guests string
	err := s.db.QueryRowContext(ctx, `SELECT id, scenario_name, scenario_source, scenario_text, scenario_hash, baseline,
		started_ns, finished_ns, status, host_json, guests_json FROM runs WHERE id = ?`, id).
		Scan(&r.ID, &r.ScenarioName, &r.ScenarioSource, &r.ScenarioText, &r.ScenarioHash, &r.Baseline,
			&started, &finished, &r.Status, &host, &guests)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("read run %d: %w", id, err)
	}
	r.Started, r.Finished = fromNS(started), fromNS(finished)
	if err := json.Unmarshal([]byte(host), &r.Host); err != nil {
		return r, fmt.Errorf("read run %d host: %w", id, err)
	}
	if err := json.Unmarshal([]byte(guests), &r.Guests); err != nil {
		return r, fmt.Errorf("read run %d guests: %w", id, err)
	}
	return r, nil
}

// RunSummary is one line of the run list.
type RunSummary struct {
	ID           int64
	ScenarioName string
	Started      time.Time
	Finished     time.Time
	Status       string
	Samples      int
	Failures     int
}

// ListRuns lists every run, oldest first.
func (s *Store) ListRuns(ctx context.Context) ([]RunSummary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.scenario_name, r.started_ns, r.finished_ns, r.status,
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
		if err := rows.Scan(&r.ID, &r.ScenarioName, &started, &finished, &r.Status, &r.Samples, &r.Failures); err != nil {
			return nil, err
		}
		r.Started, r.Finished = fromNS(started), fromNS(finished)
		out = append(out, r)
	}
	return out, rows.Err()
}

// ResolveRun turns a user's reference — a run id or "latest" — into an id.
func (s *Store) ResolveRun(ctx context.Context, ref string) (int64, error) {
	if ref == "latest" {
		var id sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(id) FROM runs`).Scan(&id); err != nil {
			return 0, err
		}
		if !id.Valid {
			return 0, fmt.Errorf("no runs stored yet in %s: %w", s.path, ErrNotFound)
		}
		return id.Int64, nil
	}
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("run %q: %w (give a run id from 'vfleet runs' or \"latest\")", ref, ErrNotFound)
	}
	if _, err := s.GetRun(ctx, id); err != nil {
		return 0, fmt.Errorf("%w (list the stored runs with 'vfleet runs')", err)
	}
	return id, nil
}

// AddSamples appends samples in one transaction.
func (s *Store) AddSamples(ctx context.Context, runID int64, samples []Sample) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add samples: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO samples
		(run_id, guest, grp, kind, runtime, workload_id, workload, params_json, repetition, metric, unit, value, better, at_ns, wall_ns, cpu_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("add samples: %w", err)
	}
	defer stmt.Close()
	for _, sm := range samples {
		params, err := json.Marshal(sm.Params)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, runID, sm.Guest, sm.Group, sm.Kind, sm.Runtime, sm.WorkloadID, sm.Workload,
			string(params), sm.Repetition, sm.Metric, sm.Unit, sm.Value, string(sm.Better), toNS(sm.At), sm.WallNS, sm.CPUNS); err != nil {
			return fmt.Errorf("add samples: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add samples: %w", err)
	}
	return nil
}

// Samples returns a run's samples in the order they were added.
func (s *Store) Samples(ctx context.Context, runID int64) ([]Sample, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, guest, grp, kind, runtime, workload_id, workload, params_json,
		repetition, metric, unit, value, better, at_ns, wall_ns, cpu_ns FROM samples WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("read samples: %w", err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var sm Sample
		var params, better string
		var at int64
		if err := rows.Scan(&sm.RunID, &sm.Guest, &sm.Group, &sm.Kind, &sm.Runtime, &sm.WorkloadID, &sm.Workload, &params,
			&sm.Repetition, &sm.Metric, &sm.Unit, &sm.Value, &better, &at, &sm.WallNS, &sm.CPUNS); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(params), &sm.Params); err != nil {
			return nil, fmt.Errorf("read sample params: %w", err)
		}
		sm.Better, sm.At = workload.Better(better), fromNS(at)
		out = append(out, sm)
	}
	return out, rows.Err()
}

// AddFailure records a step (or a guest start) that failed.
func (s *Store) AddFailure(ctx context.Context, f Failure) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO failures (run_id, guest, grp, workload_id, repetition, error, stderr, at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.RunID, f.Guest, f.Group, f.WorkloadID, f.Repetition, f.Error, f.Stderr, toNS(f.At))
	if err != nil {
		return fmt.Errorf("add failure: %w", err)
	}
	return nil
}

// Failures returns a run's failures in the order they happened.
func (s *Store) Failures(ctx context.Context, runID int64) ([]Failure, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, guest, grp, workload_id, repetition, error, stderr, at_ns
		FROM failures WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("read failures: %w", err)
	}
	defer rows.Close()
	var out []Failure
	for rows.Next() {
		var f Failure
		var at int64
		if err := rows.Scan(&f.RunID, &f.Guest, &f.Group, &f.WorkloadID, &f.Repetition, &f.Error, &f.Stderr, &at); err != nil {
			return nil, err
		}
		f.At = fromNS(at)
		out = append(out, f)
	}
	return out, rows.Err()
}
