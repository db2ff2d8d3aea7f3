// Package store keeps runs, their raw samples, failures and provenance in an
// embedded SQLite database (modernc.org/sqlite: pure Go, so vfleet stays a
// static binary without cgo).
//
// Schema (version 8):
//
//	runs(id, scenario_name, scenario_source, scenario_text, scenario_hash,
//	     baseline, started_ns, finished_ns, status, host_json, guests_json,
//	     status_reason, run_key, owner_pid, owner_start, dropped_json,
//	     origin)                                  indexed by (run_key)
//	samples(id, run_id, guest, grp, kind, runtime, workload_id, workload,
//	        params_json, repetition, metric, unit, value, better, at_ns,
//	        wall_ns, cpu_ns)                      indexed by (run_id, id)
//	failures(id, run_id, guest, grp, workload_id, repetition, error, stderr,
//	         at_ns)                               indexed by (run_id, id)
//	histograms(sample_id, run_id, guest, grp, workload_id, params_json,
//	           repetition, metric, unit, hist_json)
//	                                              indexed by (run_id, sample_id)
//	audits(id, run_id, guest, grp, kind, evidence_json, at_ns)
//	                                              indexed by (run_id, id)
//	capacity_searches(id, scenario_name, scenario_hash, slos_json,
//	                  result_json, host_json, started_ns, finished_ns)
//	baselines(scenario_name, machine, run_id, set_ns)
//	                                              keyed by (scenario_name, machine)
//	schema_migrations(version, applied_ns)
//
// Times are stored as integer Unix nanoseconds, 0 meaning unset, and read
// back in UTC: an integer round-trips exactly and sorts without parsing,
// which text timestamps in a local zone would not. The scenario is kept
// verbatim next to its sha256, and the host fingerprint, the guests and the
// parameters of each sample as JSON, so a run can be reproduced and judged
// comparable later without the files it came from. A NaN sample value is
// stored as the text 'NaN' because SQLite would turn it into NULL. A sample
// that carries the distribution it summarises (a latency) has it in
// histograms, as the JSON of a stats.Histogram, written in the same
// transaction as the sample.
//
// Lifecycle: Open creates the file (owner-only) and its directory, refuses a
// file that is not a vfleet database, and applies pending migrations in
// order, each in its own transaction; a database written by a newer vfleet
// is refused with ErrSchemaTooNew rather than guessed at. A run is created
// with status running before its first step; the samples of each step are
// appended in one transaction as soon as the step finishes and are never
// updated, so a run interrupted at any point keeps what it measured and
// stays "running" until FinishRun records its end and final status.
//
// Carrying: CarryRun reads everything about a run but its ids and owner,
// AddCarried writes such runs into another store in one transaction,
// leaving alone a run whose key is already there (package archive puts
// them in a file between the two).
package store
