package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// ErrInvalidRun is returned when a carried run could not have been written
// by a store: its scenario hash, its status or one of its JSON columns is
// not what the store keeps.
var ErrInvalidRun = errors.New("invalid carried run")

// CarriedRun is everything the store keeps about one run, as stored, but
// what only means something in this store: its row ids and its owner (a
// process of this host). It carries a run to another store (package
// archive). The JSON columns are kept as stored, so a run carried and
// carried back is the same to the byte.
type CarriedRun struct {
	Key            string
	Origin         string
	ScenarioName   string
	ScenarioSource string
	ScenarioText   []byte
	ScenarioHash   string
	Baseline       string
	StartedNS      int64
	FinishedNS     int64
	Status         string
	StatusReason   string
	Host           json.RawMessage // hostinfo.Fingerprint
	Guests         json.RawMessage // map[string]GuestRecord
	Dropped        json.RawMessage // []DroppedGroup
	Samples        []CarriedSample
	Failures       []CarriedFailure
	Audits         []CarriedAudit
	// Loads are the host's load during each step, none for a run whose
	// load was not read.
	Loads []StepLoad
}

// CarriedSample is a sample row with its histogram's, if it has one.
type CarriedSample struct {
	Guest, Group, Kind, Runtime, WorkloadID, Workload string
	Params                                            json.RawMessage // workload.Params
	Repetition                                        int
	Metric, Unit                                      string
	Value                                             float64
	Better                                            string
	AtNS, WallNS, CPUNS                               int64
	Hist                                              json.RawMessage // stats.Histogram; nil for a scalar
}

// CarriedFailure is a failure row.
type CarriedFailure struct {
	Guest, Group, WorkloadID string
	Repetition               int
	Error, Stderr            string
	AtNS                     int64
}

// CarriedAudit is an audit row.
type CarriedAudit struct {
	Guest, Group, Kind string
	Evidence           json.RawMessage
	AtNS               int64
}

// CarriedResult is what AddCarried did with one run: the id it has in
// this store, and whether a run of its key was there already.
type CarriedResult struct {
	ID      int64
	Existed bool
}

// CarryRun reads everything about one run. A run still running may gain
// rows while it is read; the caller decides whether to carry one.
func (s *Store) CarryRun(ctx context.Context, id int64) (CarriedRun, error) {
	var r CarriedRun
	var host, guests, dropped string
	err := s.db.QueryRowContext(ctx, `SELECT run_key, origin, scenario_name, scenario_source, scenario_text, scenario_hash, baseline,
		started_ns, finished_ns, status, status_reason, host_json, guests_json, dropped_json FROM runs WHERE id = ?`, id).
		Scan(&r.Key, &r.Origin, &r.ScenarioName, &r.ScenarioSource, &r.ScenarioText, &r.ScenarioHash, &r.Baseline,
			&r.StartedNS, &r.FinishedNS, &r.Status, &r.StatusReason, &host, &guests, &dropped)
	if errors.Is(err, sql.ErrNoRows) {
		return CarriedRun{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return CarriedRun{}, fmt.Errorf("read run %d: %w", id, err)
	}
	if r.ScenarioText == nil {
		r.ScenarioText = []byte{}
	}
	r.Host, r.Guests, r.Dropped = json.RawMessage(host), json.RawMessage(guests), json.RawMessage(dropped)
	if r.Samples, err = carriedSamples(ctx, s.db, id); err != nil {
		return CarriedRun{}, err
	}
	if r.Failures, err = carriedFailures(ctx, s.db, id); err != nil {
		return CarriedRun{}, err
	}
	if r.Audits, err = carriedAudits(ctx, s.db, id); err != nil {
		return CarriedRun{}, err
	}
	if r.Loads, err = s.StepLoads(ctx, id); err != nil {
		return CarriedRun{}, err
	}
	return r, nil
}

func carriedSamples(ctx context.Context, db *sql.DB, id int64) ([]CarriedSample, error) {
	rows, err := db.QueryContext(ctx, `SELECT s.guest, s.grp, s.kind, s.runtime, s.workload_id, s.workload, s.params_json,
		s.repetition, s.metric, s.unit, s.value, s.better, s.at_ns, s.wall_ns, s.cpu_ns, h.hist_json
		FROM samples s LEFT JOIN histograms h ON h.sample_id = s.id WHERE s.run_id = ? ORDER BY s.id`, id)
	if err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", id, err)
	}
	defer rows.Close()
	var out []CarriedSample
	for rows.Next() {
		var sm CarriedSample
		var params string
		var hist sql.NullString
		if err := rows.Scan(&sm.Guest, &sm.Group, &sm.Kind, &sm.Runtime, &sm.WorkloadID, &sm.Workload, &params,
			&sm.Repetition, &sm.Metric, &sm.Unit, &sm.Value, &sm.Better, &sm.AtNS, &sm.WallNS, &sm.CPUNS, &hist); err != nil {
			return nil, fmt.Errorf("read samples of run %d: %w", id, err)
		}
		sm.Params = json.RawMessage(params)
		if hist.Valid {
			sm.Hist = json.RawMessage(hist.String)
		}
		out = append(out, sm)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", id, err)
	}
	return out, nil
}

func carriedFailures(ctx context.Context, db *sql.DB, id int64) ([]CarriedFailure, error) {
	rows, err := db.QueryContext(ctx, `SELECT guest, grp, workload_id, repetition, error, stderr, at_ns
		FROM failures WHERE run_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read failures of run %d: %w", id, err)
	}
	defer rows.Close()
	var out []CarriedFailure
	for rows.Next() {
		var f CarriedFailure
		if err := rows.Scan(&f.Guest, &f.Group, &f.WorkloadID, &f.Repetition, &f.Error, &f.Stderr, &f.AtNS); err != nil {
			return nil, fmt.Errorf("read failures of run %d: %w", id, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read failures of run %d: %w", id, err)
	}
	return out, nil
}

func carriedAudits(ctx context.Context, db *sql.DB, id int64) ([]CarriedAudit, error) {
	rows, err := db.QueryContext(ctx, `SELECT guest, grp, kind, evidence_json, at_ns FROM audits WHERE run_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("run %d: read audit: %w", id, err)
	}
	defer rows.Close()
	var out []CarriedAudit
	for rows.Next() {
		var a CarriedAudit
		var ev string
		if err := rows.Scan(&a.Guest, &a.Group, &a.Kind, &ev, &a.AtNS); err != nil {
			return nil, fmt.Errorf("run %d: read audit: %w", id, err)
		}
		a.Evidence = json.RawMessage(ev)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run %d: read audit: %w", id, err)
	}
	return out, nil
}

// KeylessRuns lists the ended runs stored without a key (by a vfleet older
// than keys, or cut off between a run's creation and its key), which
// another store knows by a key derived from each (package archive).
func (s *Store) KeylessRuns(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM runs WHERE run_key = '' AND status != ? ORDER BY id`, StatusRunning)
	if err != nil {
		return nil, fmt.Errorf("list runs without a key: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list runs without a key: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs without a key: %w", err)
	}
	return ids, nil
}

// AddCarried writes carried runs in one transaction: all of them or, on
// any error, none. A run whose key the store already holds is left as it
// is (Existed), so carrying the same run twice changes nothing. A non-empty
// origin replaces each new run's own.
func (s *Store) AddCarried(ctx context.Context, runs []CarriedRun, origin string) ([]CarriedResult, error) {
	for i := range runs {
		if err := runs[i].Check(); err != nil {
			return nil, fmt.Errorf("add carried run %s: %w", runs[i].Key, err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("add carried runs: %w", explain(err, s.path))
	}
	defer tx.Rollback()
	out := make([]CarriedResult, 0, len(runs))
	for i := range runs {
		res, err := addCarried(ctx, tx, &runs[i], origin)
		if err != nil {
			return nil, fmt.Errorf("add carried run %s: %w", runs[i].Key, explain(err, s.path))
		}
		out = append(out, res)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("add carried runs: %w", explain(err, s.path))
	}
	return out, nil
}

func addCarried(ctx context.Context, tx *sql.Tx, r *CarriedRun, origin string) (CarriedResult, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM runs WHERE run_key = ? ORDER BY id LIMIT 1`, r.Key).Scan(&id)
	if err == nil {
		return CarriedResult{ID: id, Existed: true}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return CarriedResult{}, err
	}
	if origin == "" {
		origin = r.Origin
	}
	text := r.ScenarioText
	if text == nil {
		text = []byte{} // NULL would break the column's NOT NULL
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO runs
		(scenario_name, scenario_source, scenario_text, scenario_hash, baseline, started_ns, finished_ns, status, status_reason,
		 host_json, guests_json, run_key, owner_pid, owner_start, dropped_json, origin)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`,
		r.ScenarioName, r.ScenarioSource, text, r.ScenarioHash, r.Baseline, r.StartedNS, r.FinishedNS, r.Status, r.StatusReason,
		string(r.Host), string(r.Guests), r.Key, string(r.Dropped), origin)
	if err != nil {
		return CarriedResult{}, err
	}
	if id, err = res.LastInsertId(); err != nil {
		return CarriedResult{}, err
	}
	for _, sm := range r.Samples {
		res, err := tx.ExecContext(ctx, `INSERT INTO samples
			(run_id, guest, grp, kind, runtime, workload_id, workload, params_json, repetition, metric, unit, value, better, at_ns, wall_ns, cpu_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, sm.Guest, sm.Group, sm.Kind, sm.Runtime, sm.WorkloadID, sm.Workload, string(sm.Params), sm.Repetition,
			sm.Metric, sm.Unit, dbValue(sm.Value), sm.Better, sm.AtNS, sm.WallNS, sm.CPUNS)
		if err != nil {
			return CarriedResult{}, err
		}
		if sm.Hist == nil {
			continue
		}
		sampleID, err := res.LastInsertId()
		if err != nil {
			return CarriedResult{}, err
		}
		var h stats.Histogram // read for its unit, and refused as a reader would refuse it
		if err := json.Unmarshal(sm.Hist, &h); err != nil {
			return CarriedResult{}, fmt.Errorf("%w: the histogram of %s %s: %w", ErrInvalidRun, sm.WorkloadID, sm.Metric, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO histograms
			(sample_id, run_id, guest, grp, workload_id, params_json, repetition, metric, unit, hist_json)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sampleID, id, sm.Guest, sm.Group, sm.WorkloadID, string(sm.Params), sm.Repetition, sm.Metric, h.Unit(), string(sm.Hist)); err != nil {
			return CarriedResult{}, err
		}
	}
	for _, f := range r.Failures {
		if _, err := tx.ExecContext(ctx, `INSERT INTO failures (run_id, guest, grp, workload_id, repetition, error, stderr, at_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, f.Guest, f.Group, f.WorkloadID, f.Repetition, f.Error, f.Stderr, f.AtNS); err != nil {
			return CarriedResult{}, err
		}
	}
	for _, a := range r.Audits {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audits (run_id, guest, grp, kind, evidence_json, at_ns) VALUES (?, ?, ?, ?, ?, ?)`,
			id, a.Guest, a.Group, a.Kind, string(a.Evidence), a.AtNS); err != nil {
			return CarriedResult{}, err
		}
	}
	for _, l := range r.Loads {
		if err := insertStepLoad(ctx, tx, id, l); err != nil {
			return CarriedResult{}, err
		}
	}
	return CarriedResult{ID: id}, nil
}

// SameContent says whether two carried runs hold the same measurement:
// everything a store keeps of them but where each came from, its key and
// its origin (which an import may set).
func (r *CarriedRun) SameContent(o *CarriedRun) bool {
	a, b := *r, *o
	a.Key, a.Origin, a.ScenarioText, a.Samples = "", "", nil, nil
	b.Key, b.Origin, b.ScenarioText, b.Samples = "", "", nil, nil
	return reflect.DeepEqual(a, b) && bytes.Equal(r.ScenarioText, o.ScenarioText) &&
		slices.EqualFunc(r.Samples, o.Samples, sameCarriedSample)
}

// sameCarriedSample compares two samples, a NaN value the same as another.
func sameCarriedSample(x, y CarriedSample) bool {
	if x.Value != y.Value && !(math.IsNaN(x.Value) && math.IsNaN(y.Value)) {
		return false
	}
	x.Value, y.Value = 0, 0
	return reflect.DeepEqual(x, y)
}

// Check refuses what the store's readers could not read back, or what
// would make the run's record a lie: a run is only carried once it ended,
// since its owner, the process that would end it, stays behind. The
// error (ErrInvalidRun) leaves it to the caller to name the run.
func (r *CarriedRun) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRun, fmt.Sprintf(format, args...))
	}
	if r.Key == "" {
		return bad("no run key")
	}
	if _, err := scenarioHash(r.ScenarioText, r.ScenarioHash); err != nil || r.ScenarioHash == "" {
		return bad("its scenario hash %q does not match its scenario text", r.ScenarioHash)
	}
	if r.Status == StatusRunning || !slices.Contains(Statuses, r.Status) {
		return bad("status %q (want one of an ended run's)", r.Status)
	}
	var host hostinfo.Fingerprint
	var guests map[string]GuestRecord
	var dropped []DroppedGroup
	for _, c := range []struct {
		what string
		raw  json.RawMessage
		into any
	}{{"host", r.Host, &host}, {"guests", r.Guests, &guests}, {"dropped groups", r.Dropped, &dropped}} {
		if err := json.Unmarshal(c.raw, c.into); err != nil {
			return bad("%s: %v", c.what, err)
		}
	}
	switch {
	case r.StartedNS < 0:
		return bad("started_ns %d: want a time since 1970 (0 or more)", r.StartedNS)
	case r.FinishedNS < 0:
		return bad("finished_ns %d: want a time since 1970 (0 or more)", r.FinishedNS)
	case r.FinishedNS != 0 && r.FinishedNS < r.StartedNS:
		return bad("finished_ns %d is before started_ns %d: want the end at or after the start", r.FinishedNS, r.StartedNS)
	}
	groups := map[string]bool{}
	for _, g := range guests {
		groups[g.Group] = true
	}
	for i, sm := range r.Samples {
		var params workload.Params
		if err := json.Unmarshal(sm.Params, &params); err != nil {
			return bad("sample %d: params: %v", i+1, err)
		}
		if err := checkRow(sm.Repetition, map[string]int64{"at_ns": sm.AtNS, "wall_ns": sm.WallNS, "cpu_ns": sm.CPUNS}); err != nil {
			return bad("sample %d: %v", i+1, err)
		}
		if b := workload.Better(sm.Better); b != workload.HigherIsBetter && b != workload.LowerIsBetter {
			return bad("sample %d: better %q: want %q or %q", i+1, sm.Better, workload.HigherIsBetter, workload.LowerIsBetter)
		}
		// A sample is a guest's, or a group's whole (named by the group).
		// A run that lists no guests was written before runs recorded
		// them, and says nothing against its samples'.
		if _, listed := guests[sm.Guest]; len(guests) > 0 && !listed && (sm.Guest != sm.Group || !groups[sm.Group]) {
			return bad("sample %d: guest %q: want one of the run's guests (%s) or, for a group's sample, its group", i+1, sm.Guest, names(guests))
		}
		if sm.Hist != nil {
			var h stats.Histogram
			if err := json.Unmarshal(sm.Hist, &h); err != nil {
				return bad("sample %d: the histogram of %s %s: %v", i+1, sm.WorkloadID, sm.Metric, err)
			}
		}
	}
	for i, f := range r.Failures {
		if err := checkRow(f.Repetition, map[string]int64{"at_ns": f.AtNS}); err != nil {
			return bad("failure %d: %v", i+1, err)
		}
	}
	for i, a := range r.Audits {
		if !json.Valid(a.Evidence) {
			return bad("audit %d: its evidence is not JSON", i+1)
		}
		if err := checkRow(0, map[string]int64{"at_ns": a.AtNS}); err != nil {
			return bad("audit %d: %v", i+1, err)
		}
	}
	for i, l := range r.Loads {
		if err := l.check(); err != nil {
			return bad("host load %d: %v", i+1, err)
		}
	}
	return nil
}

// checkRow refuses what no run writes in a row: a negative repetition,
// time or duration.
func checkRow(rep int, times map[string]int64) error {
	if rep < 0 {
		return fmt.Errorf("repetition %d: want 0 or more", rep)
	}
	for _, field := range slices.Sorted(maps.Keys(times)) {
		if v := times[field]; v < 0 {
			return fmt.Errorf("%s %d: want 0 or more", field, v)
		}
	}
	return nil
}

// names lists a run's guests for a message.
func names(guests map[string]GuestRecord) string {
	return strings.Join(slices.Sorted(maps.Keys(guests)), ", ")
}
