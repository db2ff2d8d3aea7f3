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

// CapacitySearch is one `vfleet capacity` search: the SLOs it was given,
// its result (the capacity package's, kept as its JSON so the store need
// not know its shape), the host it ran on and when.
type CapacitySearch struct {
	ID           int64
	ScenarioName string
	ScenarioHash string
	SLOs         []string
	Result       json.RawMessage
	Host         hostinfo.Fingerprint
	Started      time.Time
	Finished     time.Time
}

// AddCapacitySearch records a finished search and returns its id (also
// set in c.ID).
func (s *Store) AddCapacitySearch(ctx context.Context, c *CapacitySearch) (int64, error) {
	slos, err := json.Marshal(c.SLOs)
	if err != nil {
		return 0, fmt.Errorf("store capacity search: encode SLOs: %w", err)
	}
	host, err := json.Marshal(c.Host)
	if err != nil {
		return 0, fmt.Errorf("store capacity search: encode host: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO capacity_searches (scenario_name, scenario_hash, slos_json, result_json, host_json, started_ns, finished_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, c.ScenarioName, c.ScenarioHash, string(slos), string(c.Result), string(host), toNS(c.Started), toNS(c.Finished))
	if err != nil {
		return 0, fmt.Errorf("store capacity search: %w", err)
	}
	if c.ID, err = res.LastInsertId(); err != nil {
		return 0, fmt.Errorf("store capacity search: %w", err)
	}
	return c.ID, nil
}

// GetCapacitySearch returns one stored search.
func (s *Store) GetCapacitySearch(ctx context.Context, id int64) (CapacitySearch, error) {
	c := CapacitySearch{ID: id}
	var slos, result, host string
	var started, finished int64
	err := s.db.QueryRowContext(ctx, `SELECT scenario_name, scenario_hash, slos_json, result_json, host_json, started_ns, finished_ns
		FROM capacity_searches WHERE id = ?`, id).Scan(&c.ScenarioName, &c.ScenarioHash, &slos, &result, &host, &started, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return CapacitySearch{}, fmt.Errorf("capacity search %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return CapacitySearch{}, fmt.Errorf("read capacity search %d: %w", id, err)
	}
	if err := json.Unmarshal([]byte(slos), &c.SLOs); err != nil {
		return CapacitySearch{}, fmt.Errorf("read capacity search %d SLOs: %w", id, err)
	}
	if err := json.Unmarshal([]byte(host), &c.Host); err != nil {
		return CapacitySearch{}, fmt.Errorf("read capacity search %d host: %w", id, err)
	}
	c.Result = json.RawMessage(result)
	c.Started, c.Finished = fromNS(started), fromNS(finished)
	return c, nil
}
