package store

import (
	"database/sql"
	"fmt"
	"time"
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

	// Version 2: the distribution behind a latency sample. One row per sample
	// that has one, keyed by the sample; the sample's dimensions are repeated
	// so the table can be queried on its own, and the histogram is the JSON
	// of stats.Histogram (logarithmic buckets, mergeable).
	`CREATE TABLE histograms (
		sample_id   INTEGER PRIMARY KEY REFERENCES samples(id),
		run_id      INTEGER NOT NULL REFERENCES runs(id),
		guest       TEXT NOT NULL,
		grp         TEXT NOT NULL,
		workload_id TEXT NOT NULL,
		params_json TEXT NOT NULL,
		repetition  INTEGER NOT NULL,
		metric      TEXT NOT NULL,
		unit        TEXT NOT NULL,
		hist_json   TEXT NOT NULL
	);
	CREATE INDEX histograms_by_run ON histograms(run_id, sample_id);`,

	// Version 3: why a run ended as it did, and who runs it. The run's key
	// names its ledger; the owner (pid and start time) lets a later command
	// tell a run still in progress from one whose vfleet was killed. Runs
	// written before this version have neither and are left as they are.
	`ALTER TABLE runs ADD COLUMN status_reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN run_key TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE runs ADD COLUMN owner_start INTEGER NOT NULL DEFAULT 0;`,

	// Version 4: the isolation audit, one row per guest probed, plus the
	// host's own view (guest '') every guest is compared with. The raw
	// evidence is kept, not the verdicts, so a later vfleet judges old runs
	// by its own rules.
	`CREATE TABLE audits (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id        INTEGER NOT NULL REFERENCES runs(id),
		guest         TEXT NOT NULL,
		grp           TEXT NOT NULL,
		kind          TEXT NOT NULL,
		evidence_json TEXT NOT NULL,
		at_ns         INTEGER NOT NULL
	);
	CREATE INDEX audits_by_run ON audits(run_id, id);`,

	// Version 5: the scenario's optional guest groups the host refused,
	// each with the probe's reason, so a report says what was not run and
	// why rather than leaving the group silently out.
	`ALTER TABLE runs ADD COLUMN dropped_json TEXT NOT NULL DEFAULT '[]';`,

	// Version 6: capacity searches. A search is not a run of its own: each
	// size it measured is an ordinary run of the scenario (its samples
	// labelled with the fleet size), and this row keeps what ties them
	// together: the SLOs, the answer and every size's verdict with the
	// runs behind it (result_json), and the host searched on.
	`CREATE TABLE capacity_searches (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		scenario_name TEXT NOT NULL,
		scenario_hash TEXT NOT NULL,
		slos_json     TEXT NOT NULL,
		result_json   TEXT NOT NULL,
		host_json     TEXT NOT NULL,
		started_ns    INTEGER NOT NULL,
		finished_ns   INTEGER NOT NULL
	);`,

	// Version 7: where a run was measured when not on this store's host
	// (set when it is imported from another store: its file, or the
	// machine it ran on), '' for a run of this host. Importing looks runs
	// up by their key, which names a run across stores.
	`ALTER TABLE runs ADD COLUMN origin TEXT NOT NULL DEFAULT '';
	CREATE INDEX runs_by_key ON runs(run_key);`,

	// Version 8: the run each scenario's new runs are compared with on
	// each machine (`vfleet baseline set`, `compare --baseline`): one per
	// scenario name and machine, replaced when set again.
	`CREATE TABLE baselines (
		scenario_name TEXT NOT NULL,
		machine       TEXT NOT NULL,
		run_id        INTEGER NOT NULL REFERENCES runs(id),
		set_ns        INTEGER NOT NULL,
		PRIMARY KEY (scenario_name, machine)
	);`,

	// Version 9: what the host's CPUs did while each measured step ran,
	// read from the machine that ran it: the ticks of every CPU, those
	// running tasks and those a hypervisor stole, summed over the CPUs, and
	// the CPU time the run's own processes used meanwhile. A run's
	// intervals widen with what else the host did; runs before this
	// version have none, and their load is not known.
	`CREATE TABLE step_loads (
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id      INTEGER NOT NULL REFERENCES runs(id),
		guest       TEXT NOT NULL,
		workload_id TEXT NOT NULL,
		repetition  INTEGER NOT NULL,
		started_ns  INTEGER NOT NULL,
		wall_ns     INTEGER NOT NULL,
		cpus        INTEGER NOT NULL,
		total_ticks INTEGER NOT NULL,
		task_ticks  INTEGER NOT NULL,
		steal_ticks INTEGER NOT NULL,
		own_ns      INTEGER NOT NULL
	);
	CREATE INDEX step_loads_by_run ON step_loads(run_id, id);`,
}

// SchemaVersion is the schema this vfleet writes.
func SchemaVersion() int { return len(migrations) }

// carriedSchema is the newest schema version whose migration changed a
// table a carried run is read from (CarryRun: runs, samples, histograms,
// failures, audits, step_loads): 9 gave runs their steps' host load. A
// migration of any other table leaves it, so the files that carry runs
// between stores, which record it, stay readable by the vfleets before
// it; a migration of a carried table must set it to its own version.
const carriedSchema = 9

// CarriedSchemaVersion is the schema version of the runs CarryRun reads:
// what a vfleet must know to read them back.
func CarriedSchemaVersion() int { return carriedSchema }

// checkSchema, for a read-only store, fails unless the database has
// exactly the schema this vfleet writes.
func (s *Store) checkSchema() error {
	tracked, others, err := countTables(s.db.QueryRow)
	if err != nil {
		return err
	}
	if tracked == 0 && others > 0 {
		return fmt.Errorf("%w: it is an SQLite database of another program", ErrNotDatabase)
	}
	v := 0
	if tracked > 0 {
		if err := s.db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
	}
	switch {
	case v > len(migrations):
		return fmt.Errorf("%w: its schema is version %d, this vfleet knows up to %d (use a newer vfleet)", ErrSchemaTooNew, v, len(migrations))
	case v < len(migrations):
		return fmt.Errorf("%w: its schema is version %d and this vfleet reads version %d; it is upgraded when opened by a vfleet that may write it",
			ErrSchemaTooOld, v, len(migrations))
	}
	return nil
}

func (s *Store) migrate() error {
	for {
		done, err := s.migrateOne()
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next pending migration, if any. The version is
// read inside the same write transaction, so two processes opening a new
// database at once cannot both apply a migration.
func (s *Store) migrateOne() (done bool, err error) {
	tx, err := s.db.Begin()
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	current, err := schemaVersion(tx)
	if err != nil {
		return false, err
	}
	if current > len(migrations) {
		return false, fmt.Errorf("%w: its schema is version %d, this vfleet knows up to %d (use a newer vfleet)",
			ErrSchemaTooNew, current, len(migrations))
	}
	if current == len(migrations) {
		return true, tx.Commit()
	}
	next := current + 1
	if _, err := tx.Exec(migrations[current]); err != nil {
		return false, fmt.Errorf("migration %d: %w", next, err)
	}
	if _, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_ns) VALUES (?, ?)`, next, time.Now().UnixNano()); err != nil {
		return false, fmt.Errorf("record migration %d: %w", next, err)
	}
	return false, tx.Commit()
}

// refuseForeign fails with ErrNotDatabase for an SQLite file that has
// tables but not vfleet's bookkeeping, reading only. schemaVersion checks
// again inside the migration's transaction, where it is race-free.
func (s *Store) refuseForeign() error {
	tracked, others, err := countTables(s.db.QueryRow)
	if err != nil {
		return err
	}
	if tracked == 0 && others > 0 {
		return fmt.Errorf("%w: it is an SQLite database of another program", ErrNotDatabase)
	}
	return nil
}

func countTables(queryRow func(string, ...any) *sql.Row) (tracked, others int, err error) {
	if err := queryRow(`SELECT
		COUNT(*) FILTER (WHERE name = 'schema_migrations'),
		COUNT(*) FILTER (WHERE name <> 'schema_migrations')
		FROM sqlite_master WHERE type = 'table'`).Scan(&tracked, &others); err != nil {
		return 0, 0, fmt.Errorf("read schema: %w", err)
	}
	return tracked, others, nil
}

// schemaVersion returns the applied schema version, creating the
// bookkeeping table in a fresh database. An SQLite file that has tables but
// no bookkeeping belongs to another program and is left alone.
func schemaVersion(tx *sql.Tx) (int, error) {
	tracked, others, err := countTables(tx.QueryRow)
	if err != nil {
		return 0, err
	}
	if tracked == 0 {
		if others > 0 {
			return 0, fmt.Errorf("%w: it is an SQLite database of another program", ErrNotDatabase)
		}
		if _, err := tx.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ns INTEGER NOT NULL)`); err != nil {
			return 0, fmt.Errorf("create schema_migrations: %w", err)
		}
		return 0, nil
	}
	var v int
	if err := tx.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
