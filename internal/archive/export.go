package archive

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/version"
)

// Export writes the runs of st named by runIDs, each once in the order
// first given, to w. A run that does not exist (store.ErrNotFound) or has
// not ended (ErrRunning) fails the export before anything is written; an
// error while writing leaves w without its trailer, which Import refuses.
func Export(ctx context.Context, st *store.Store, runIDs []int64, w io.Writer) error {
	var ids []int64
	seen := map[int64]bool{}
	for _, id := range runIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := st.GetRun(ctx, id)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if r.Status == store.StatusRunning {
			return fmt.Errorf("export run %d: %w (export it once it has ended)", id, ErrRunning)
		}
		ids = append(ids, id)
	}
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	lw := &lineWriter{sum: sha256.New()}
	lw.enc = json.NewEncoder(io.MultiWriter(gz, lw.sum))
	lw.enc.SetEscapeHTML(false)
	if err := lw.write(header{Format: Format, Version: FormatVersion, Schema: store.CarriedSchemaVersion(), Vfleet: version.String(), Runs: len(ids)}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var end trailer
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		cr, err := st.CarryRun(ctx, id)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := writeRun(lw, cr); err != nil {
			return fmt.Errorf("export run %d: %w", id, err)
		}
		end.Runs++
		end.Samples += len(cr.Samples)
		end.Failures += len(cr.Failures)
		end.Audits += len(cr.Audits)
		end.Loads += len(cr.Loads)
	}
	end.SHA256 = hex.EncodeToString(lw.sum.Sum(nil))
	// The trailer is not part of its own sum: it goes to the file only.
	tail := json.NewEncoder(gz)
	if err := tail.Encode(record{End: &end}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// lineWriter writes one JSON line to the file and to the running sum.
type lineWriter struct {
	enc *json.Encoder
	sum hash.Hash
}

func (lw *lineWriter) write(v any) error { return lw.enc.Encode(v) }

func writeRun(lw *lineWriter, cr store.CarriedRun) error {
	rr, err := recordOf(cr)
	if err != nil {
		return err
	}
	if err := lw.write(record{Run: &rr}); err != nil {
		return err
	}
	for _, sm := range cr.Samples {
		if err := lw.write(record{Sample: &sampleRecord{
			Guest: text(sm.Guest), Group: text(sm.Group), Kind: text(sm.Kind), Runtime: text(sm.Runtime),
			WorkloadID: text(sm.WorkloadID), Workload: text(sm.Workload), Params: sm.Params, Repetition: sm.Repetition,
			Metric: text(sm.Metric), Unit: text(sm.Unit), Value: number(sm.Value), Better: text(sm.Better),
			AtNS: sm.AtNS, WallNS: sm.WallNS, CPUNS: sm.CPUNS, Hist: sm.Hist,
		}}); err != nil {
			return err
		}
	}
	for _, f := range cr.Failures {
		if err := lw.write(record{Failure: &failureRecord{
			Guest: text(f.Guest), Group: text(f.Group), WorkloadID: text(f.WorkloadID), Repetition: f.Repetition,
			Error: text(f.Error), Stderr: text(f.Stderr), AtNS: f.AtNS,
		}}); err != nil {
			return err
		}
	}
	for _, a := range cr.Audits {
		if err := lw.write(record{Audit: &auditRecord{
			Guest: text(a.Guest), Group: text(a.Group), Kind: text(a.Kind), Evidence: a.Evidence, AtNS: a.AtNS,
		}}); err != nil {
			return err
		}
	}
	for _, l := range cr.Loads {
		if err := lw.write(record{Load: &loadRecord{
			Guest: text(l.Guest), WorkloadID: text(l.WorkloadID), Repetition: l.Repetition, StartedNS: l.StartedNS, WallNS: l.WallNS,
			CPUs: l.CPUs, TotalTicks: l.TotalTicks, TaskTicks: l.TaskTicks, StealTicks: l.StealTicks, OwnNS: l.OwnNS,
		}}); err != nil {
			return err
		}
	}
	return nil
}

// recordOf is the run's record as the file holds it: a run without a key
// of its own under the one derived from it.
func recordOf(cr store.CarriedRun) (runRecord, error) {
	rr := runRecord{
		Key: text(cr.Key), Origin: text(exportedOrigin(cr)), ScenarioName: text(cr.ScenarioName),
		ScenarioSource: text(cr.ScenarioSource), ScenarioText: text(cr.ScenarioText), ScenarioHash: text(cr.ScenarioHash),
		Baseline: text(cr.Baseline), StartedNS: cr.StartedNS, FinishedNS: cr.FinishedNS, Status: text(cr.Status),
		StatusReason: text(cr.StatusReason), Host: cr.Host, Guests: cr.Guests, Dropped: cr.Dropped,
		Samples: len(cr.Samples), Failures: len(cr.Failures), Audits: len(cr.Audits), Loads: len(cr.Loads),
	}
	if rr.Key == "" {
		key, err := derivedKey(rr)
		if err != nil {
			return runRecord{}, err
		}
		rr.Key = text(key)
	}
	return rr, nil
}

// exportedOrigin is where the run was measured, which an empty origin
// leaves to the store it is in: in another store it must name that host.
func exportedOrigin(cr store.CarriedRun) string {
	if cr.Origin != "" {
		return cr.Origin
	}
	var host hostinfo.Fingerprint
	if err := json.Unmarshal(cr.Host, &host); err != nil || host.Hostname == "" {
		return "host:unnamed"
	}
	return "host:" + host.Hostname
}

// derivedKey names a run stored before runs had keys (schema version 3),
// from its own record, so that it is the same each time the run is
// exported and importing it twice finds it the second time.
func derivedKey(rr runRecord) (string, error) {
	b, err := json.Marshal(rr)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "k-" + hex.EncodeToString(sum[:12]), nil
}
