package store

import (
	"context"
	"database/sql"
	"fmt"
)

// StepLoad is what the host's CPUs did while one measured step ran, read
// on the machine that ran it: every CPU's ticks (Total), those running
// tasks (Tasks: user, nice, system) and those a hypervisor gave to
// others (Steal), in clock ticks summed over the CPUs; and the CPU time
// the run's own processes used meanwhile (OwnNS: its cgroups and vfleet
// itself), which the rest of the tasks' time is set against.
type StepLoad struct {
	// Guest is the step's guest, '' for a step several guests ran
	// together.
	Guest      string
	WorkloadID string
	Repetition int
	StartedNS  int64
	WallNS     int64
	CPUs       int
	// Ticks of USER_HZ, summed over the CPUs.
	TotalTicks, TaskTicks, StealTicks int64
	OwnNS                             int64
}

// AddStepLoad stores one step's host load.
func (s *Store) AddStepLoad(ctx context.Context, runID int64, l StepLoad) error {
	if err := insertStepLoad(ctx, s.db, runID, l); err != nil {
		return fmt.Errorf("run %d: store the host load of %s: %w", runID, l.WorkloadID, explain(err, s.path))
	}
	return nil
}

// insertStepLoad writes one row, on its own or in a carried run's
// transaction.
func insertStepLoad(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, runID int64, l StepLoad) error {
	_, err := db.ExecContext(ctx, `INSERT INTO step_loads
		(run_id, guest, workload_id, repetition, started_ns, wall_ns, cpus, total_ticks, task_ticks, steal_ticks, own_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, l.Guest, l.WorkloadID, l.Repetition, l.StartedNS, l.WallNS, l.CPUs, l.TotalTicks, l.TaskTicks, l.StealTicks, l.OwnNS)
	return err
}

// StepLoads returns a run's steps' host load in the order stored; none
// for a run whose load was not read (one stored before it was).
func (s *Store) StepLoads(ctx context.Context, runID int64) ([]StepLoad, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT guest, workload_id, repetition, started_ns, wall_ns, cpus, total_ticks, task_ticks, steal_ticks, own_ns
		FROM step_loads WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("run %d: read the host load: %w", runID, err)
	}
	defer rows.Close()
	var out []StepLoad
	for rows.Next() {
		var l StepLoad
		if err := rows.Scan(&l.Guest, &l.WorkloadID, &l.Repetition, &l.StartedNS, &l.WallNS, &l.CPUs,
			&l.TotalTicks, &l.TaskTicks, &l.StealTicks, &l.OwnNS); err != nil {
			return nil, fmt.Errorf("run %d: read the host load: %w", runID, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run %d: read the host load: %w", runID, err)
	}
	return out, nil
}

// check refuses what no run writes: a negative figure, no CPU, or more
// task or stolen ticks than the CPUs had.
func (l StepLoad) check() error {
	if err := checkRow(l.Repetition, map[string]int64{"started_ns": l.StartedNS, "wall_ns": l.WallNS,
		"total_ticks": l.TotalTicks, "task_ticks": l.TaskTicks, "steal_ticks": l.StealTicks, "own_ns": l.OwnNS}); err != nil {
		return err
	}
	switch {
	case l.CPUs < 1:
		return fmt.Errorf("cpus %d: want 1 or more", l.CPUs)
	case l.TaskTicks+l.StealTicks > l.TotalTicks:
		return fmt.Errorf("task_ticks %d and steal_ticks %d exceed total_ticks %d: want at most the CPUs' ticks", l.TaskTicks, l.StealTicks, l.TotalTicks)
	}
	return nil
}
