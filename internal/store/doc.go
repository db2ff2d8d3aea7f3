// Package store keeps runs, their raw samples, failures and provenance in an
// embedded SQLite database (modernc.org/sqlite: pure Go, so vfleet stays a
// static binary).
//
// Schema (version 1):
//
//	runs(id, scenario_name, scenario_source, scenario_text, scenario_hash,
//	     baseline, started_ns, finished_ns, status, host_json, guests_json)
//	samples(id, run_id, guest, grp, kind, runtime, workload_id, workload,
//	        params_json, repetition, metric, unit, value, better, at_ns,
//	        wall_ns, cpu_ns)
//	failures(id, run_id, guest, grp, workload_id, repetition, error, stderr, at_ns)
//
// Times are stored as Unix nanoseconds (UTC), so they round-trip exactly.
//
// Lifecycle: a run is created with status running before its first step;
// samples are appended in one transaction per step as they are measured and
// never updated, so a run interrupted at any point keeps what it measured;
// FinishRun records the end and the final status. Migrations are applied in
// order on Open, each in its own transaction; a database written by a newer
// vfleet is refused rather than guessed at.
package store
