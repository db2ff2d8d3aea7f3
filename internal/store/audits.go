package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// AuditRecord is the raw evidence of one guest's isolation probes (package
// audit), or of the host's own when Guest is empty.
type AuditRecord struct {
	Guest    string          `json:"guest"`
	Group    string          `json:"group"`
	Kind     string          `json:"kind"`
	Evidence json.RawMessage `json:"evidence"`
}

// AddAudits stores a run's audit in one transaction.
func (s *Store) AddAudits(ctx context.Context, runID int64, recs []AuditRecord) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("run %d: store audit: %w", runID, err)
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	for _, r := range recs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audits (run_id, guest, grp, kind, evidence_json, at_ns) VALUES (?, ?, ?, ?, ?, ?)`,
			runID, r.Guest, r.Group, r.Kind, string(r.Evidence), now); err != nil {
			return fmt.Errorf("run %d: store audit of %q: %w", runID, r.Guest, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("run %d: store audit: %w", runID, err)
	}
	return nil
}

// Audits returns a run's audit in the order it was stored; none for a run
// that was not audited.
func (s *Store) Audits(ctx context.Context, runID int64) ([]AuditRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT guest, grp, kind, evidence_json FROM audits WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("run %d: read audit: %w", runID, err)
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var r AuditRecord
		var ev string
		if err := rows.Scan(&r.Guest, &r.Group, &r.Kind, &ev); err != nil {
			return nil, fmt.Errorf("run %d: read audit: %w", runID, err)
		}
		r.Evidence = json.RawMessage(ev)
		out = append(out, r)
	}
	return out, rows.Err()
}
