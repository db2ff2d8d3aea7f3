package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// AddSamples appends the samples of one step to a run in one transaction,
// so a step is stored whole or not at all. Each sample's RunID is taken
// from runID. Samples are never updated or deleted.
func (s *Store) AddSamples(ctx context.Context, runID int64, samples []Sample) error {
	if len(samples) == 0 {
		return nil
	}
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
	var histStmt *sql.Stmt
	for _, sm := range samples {
		params, err := json.Marshal(sm.Params)
		if err != nil {
			return fmt.Errorf("add samples: encode params: %w", err)
		}
		res, err := stmt.ExecContext(ctx, runID, sm.Guest, sm.Group, sm.Kind, sm.Runtime, sm.WorkloadID, sm.Workload,
			string(params), sm.Repetition, sm.Metric, sm.Unit, dbValue(sm.Value), string(sm.Better),
			toNS(sm.At), sm.WallNS, sm.CPUNS)
		if err != nil {
			return fmt.Errorf("add samples: %w", missingRun(err, runID))
		}
		if sm.Hist == nil {
			continue
		}
		hist, err := json.Marshal(sm.Hist)
		if err != nil {
			return fmt.Errorf("add samples: encode the histogram of %s %s: %w", sm.WorkloadID, sm.Metric, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("add samples: %w", err)
		}
		if histStmt == nil {
			if histStmt, err = tx.PrepareContext(ctx, `INSERT INTO histograms
				(sample_id, run_id, guest, grp, workload_id, params_json, repetition, metric, unit, hist_json)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
				return fmt.Errorf("add samples: %w", err)
			}
			defer histStmt.Close()
		}
		if _, err := histStmt.ExecContext(ctx, id, runID, sm.Guest, sm.Group, sm.WorkloadID, string(params), sm.Repetition,
			sm.Metric, sm.Hist.Unit(), string(hist)); err != nil {
			return fmt.Errorf("add samples: histogram of %s %s: %w", sm.WorkloadID, sm.Metric, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add samples: %w", err)
	}
	return nil
}

// dbValue binds a sample value. SQLite turns a NaN into NULL, which the
// NOT NULL column refuses, and that would lose the whole step; a tool that
// printed "nan" still reported something, so NaN is stored as the text
// 'NaN', which scans back into a float64 as NaN. Infinities are REAL.
func dbValue(v float64) any {
	if math.IsNaN(v) {
		return "NaN"
	}
	return v
}

// missingRun classifies the foreign-key failure of a row written for a run
// that does not exist.
func missingRun(err error, runID int64) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	return err
}

// Samples returns a run's samples in the order they were added, each with
// its histogram if it has one.
func (s *Store) Samples(ctx context.Context, runID int64) ([]Sample, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.run_id, s.guest, s.grp, s.kind, s.runtime, s.workload_id, s.workload,
		s.params_json, s.repetition, s.metric, s.unit, s.value, s.better, s.at_ns, s.wall_ns, s.cpu_ns, h.hist_json
		FROM samples s LEFT JOIN histograms h ON h.sample_id = s.id
		WHERE s.run_id = ? ORDER BY s.id`, runID)
	if err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var sm Sample
		var params, better string
		var hist sql.NullString
		var at int64
		if err := rows.Scan(&sm.RunID, &sm.Guest, &sm.Group, &sm.Kind, &sm.Runtime, &sm.WorkloadID, &sm.Workload, &params,
			&sm.Repetition, &sm.Metric, &sm.Unit, &sm.Value, &better, &at, &sm.WallNS, &sm.CPUNS, &hist); err != nil {
			return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
		}
		if err := json.Unmarshal([]byte(params), &sm.Params); err != nil {
			return nil, fmt.Errorf("read samples of run %d: params: %w", runID, err)
		}
		if hist.Valid {
			sm.Hist = new(stats.Histogram)
			if err := json.Unmarshal([]byte(hist.String), sm.Hist); err != nil {
				return nil, fmt.Errorf("read samples of run %d: histogram of %s %s (%s, repetition %d): %w",
					runID, sm.WorkloadID, sm.Metric, sm.Guest, sm.Repetition, err)
			}
		}
		sm.Better, sm.At = workload.Better(better), fromNS(at)
		out = append(out, sm)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
	}
	return out, nil
}

// AddFailure records a step (or a guest start) that produced no samples.
func (s *Store) AddFailure(ctx context.Context, f Failure) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO failures (run_id, guest, grp, workload_id, repetition, error, stderr, at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.RunID, f.Guest, f.Group, f.WorkloadID, f.Repetition, f.Error, f.Stderr, toNS(f.At))
	if err != nil {
		return fmt.Errorf("add failure: %w", missingRun(err, f.RunID))
	}
	return nil
}

// Failures returns a run's failures in the order they were recorded.
func (s *Store) Failures(ctx context.Context, runID int64) ([]Failure, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, guest, grp, workload_id, repetition, error, stderr, at_ns
		FROM failures WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("read failures of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Failure
	for rows.Next() {
		var f Failure
		var at int64
		if err := rows.Scan(&f.RunID, &f.Guest, &f.Group, &f.WorkloadID, &f.Repetition, &f.Error, &f.Stderr, &at); err != nil {
			return nil, fmt.Errorf("read failures of run %d: %w", runID, err)
		}
		f.At = fromNS(at)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read failures of run %d: %w", runID, err)
	}
	return out, nil
}
