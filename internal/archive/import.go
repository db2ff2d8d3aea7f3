package archive

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/store"
)

// Bounds on what an import holds before the file's trailer is checked:
// the sum is at the end (and proves no origin: a forger computes it too),
// so a hostile or damaged file must not make Import hold what it
// announces. A file over one is refused with ErrTooLarge as soon as it
// passes it, before what it counts is read. A sample held costs about
// 650 bytes, so a file at MaxRecords holds about 170 MiB; a store with
// more is carried in several files.
const (
	// MaxRunRecords bounds the samples, the failures, the audits and the
	// loads one run announces, each.
	MaxRunRecords = 1 << 17
	// MaxRecords bounds the samples, failures, audits and loads of a
	// whole file together.
	MaxRecords = 1 << 18
	// MaxDecoded bounds the bytes of a file once unzipped.
	MaxDecoded = 1 << 30
	// maxRecord bounds one line: a run's largest record (its scenario, an
	// audit's evidence, a histogram) is a few KiB, its scenario at most 1 MiB.
	maxRecord = 16 << 20
)

// ImportOptions says how to import.
type ImportOptions struct {
	// Origin is where the runs came from (the machine a run was measured
	// on, "ssh://root@HOST:22"), stored on each run imported; empty keeps
	// the origin the file gives.
	Origin string
}

// Imported is what Import did with one run of the file, in the file's
// order: its id in the store, its key, and whether a run of that key was
// there already, in which case nothing was written for it; Differs then
// says that the file's run is not the stored one (the same key, another
// measurement or a run altered since), which the store keeps.
type Imported struct {
	ID      int64
	Key     string
	Existed bool
	Differs bool
}

// Import reads a runs file into st, all its runs in one transaction. The
// whole file is read and checked (format, versions, structure, counts,
// sha256, each run as the store would take it) before anything is
// written, and a file refused leaves the store as it was: ErrNotArchive,
// ErrTooNew naming both versions, ErrCorrupt, ErrTooLarge, ErrCannotImport
// naming the run.
func Import(ctx context.Context, st *store.Store, r io.Reader, opts ImportOptions) ([]Imported, error) {
	runs, err := read(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	for i := range runs {
		if err := runs[i].Check(); err != nil {
			return nil, fmt.Errorf("run %s %w: %w", runs[i].Key, ErrCannotImport, err)
		}
	}
	keyless, err := keylessByDerivedKey(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	out := make([]Imported, len(runs))
	var fresh []store.CarriedRun
	var at []int // where each of fresh is in runs
	for i, cr := range runs {
		if id, ok := keyless[cr.Key]; ok {
			out[i] = Imported{ID: id, Key: cr.Key, Existed: true}
			continue
		}
		fresh, at = append(fresh, cr), append(at, i)
	}
	res, err := st.AddCarried(ctx, fresh, opts.Origin)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	for j, x := range res {
		out[at[j]] = Imported{ID: x.ID, Key: fresh[j].Key, Existed: x.Existed}
	}
	for i := range out {
		if !out[i].Existed {
			continue
		}
		stored, err := st.CarryRun(ctx, out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		out[i].Differs = !stored.SameContent(&runs[i])
	}
	return out, nil
}

// keylessByDerivedKey maps the key each of st's runs without one is
// exported under to the run's id: export only reads, so the run's row
// keeps no key, and a file bringing the run back names it by that one.
func keylessByDerivedKey(ctx context.Context, st *store.Store) (map[string]int64, error) {
	ids, err := st.KeylessRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, id := range ids {
		cr, err := st.CarryRun(ctx, id)
		if err != nil {
			return nil, err
		}
		rr, err := recordOf(cr)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", id, err)
		}
		out[string(rr.Key)] = id
	}
	return out, nil
}

// read decodes and checks a whole file.
func read(ctx context.Context, r io.Reader) ([]store.CarriedRun, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w (not gzip: %w)", ErrNotArchive, err)
	}
	lr := &lineReader{br: bufio.NewReader(io.LimitReader(gz, MaxDecoded+1)), sum: sha256.New()}
	h, err := readHeader(lr)
	if err != nil {
		return nil, err
	}
	var runs []store.CarriedRun
	var samples, failures, audits, loads int
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum := lr.sum.Sum(nil) // of every line before this one, should it be the trailer
		rec, n, err := lr.record()
		if err != nil {
			return nil, err
		}
		if rec.End != nil {
			end := *rec.End
			if want := (trailer{Runs: len(runs), Samples: samples, Failures: failures, Audits: audits, Loads: loads, SHA256: hex.EncodeToString(sum)}); end != want {
				return nil, fmt.Errorf("%w: its trailer says %+v, its contents are %+v", ErrCorrupt, end, want)
			}
			if len(runs) != h.Runs {
				return nil, fmt.Errorf("%w: its header announces %d runs, it holds %d", ErrCorrupt, h.Runs, len(runs))
			}
			if err := lr.atEnd(); err != nil {
				return nil, err
			}
			return runs, nil
		}
		if rec.Run == nil {
			return nil, fmt.Errorf("%w: line %d: want a run or the trailer", ErrCorrupt, n)
		}
		if err := checkAnnounced(*rec.Run, samples+failures+audits+loads); err != nil {
			return nil, err
		}
		cr, err := readRun(lr, *rec.Run)
		if err != nil {
			return nil, err
		}
		runs = append(runs, cr)
		samples += len(cr.Samples)
		failures += len(cr.Failures)
		audits += len(cr.Audits)
		loads += len(cr.Loads)
	}
}

// checkAnnounced refuses a run announcing more records than an import
// holds, with held the records of the runs before it.
func checkAnnounced(rr runRecord, held int) error {
	for _, c := range []struct {
		what string
		n    int
	}{{"samples", rr.Samples}, {"failures", rr.Failures}, {"audits", rr.Audits}, {"loads", rr.Loads}} {
		if c.n > MaxRunRecords {
			return fmt.Errorf("%w: run %q announces %d %s, an import takes at most %d a run", ErrTooLarge, rr.Key, c.n, c.what, MaxRunRecords)
		}
	}
	if n := held + rr.Samples + rr.Failures + rr.Audits + rr.Loads; n > MaxRecords {
		return fmt.Errorf("%w: with run %q it announces %d samples, failures, audits and loads, an import takes at most %d", ErrTooLarge, rr.Key, n, MaxRecords)
	}
	return nil
}

func readHeader(lr *lineReader) (header, error) {
	line, err := lr.line()
	if errors.Is(err, errEnded) {
		return header{}, fmt.Errorf("%w (not one line in it)", ErrNotArchive)
	}
	if err != nil {
		return header{}, err
	}
	// The format and the versions are read before anything else of the
	// header, which a newer version may have changed, as any number: a
	// version past what an int holds is still a newer one.
	var v struct {
		Format          string
		Version, Schema json.Number
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Format != Format {
		return header{}, fmt.Errorf("%w (its first line is no %s header)", ErrNotArchive, Format)
	}
	if newer(v.Version, FormatVersion) {
		return header{}, fmt.Errorf("%w: its format is version %s, this vfleet reads up to version %d (use a newer vfleet)",
			ErrTooNew, v.Version, FormatVersion)
	}
	// Runs of any schema this vfleet knows are read: a file names its
	// runs' schema (older vfleets wrote the whole store's, as high or
	// higher), which only a change of a carried table moves.
	if newer(v.Schema, store.SchemaVersion()) {
		return header{}, fmt.Errorf("%w: its runs are of store schema version %s, this vfleet knows up to version %d (use a newer vfleet)",
			ErrTooNew, v.Schema, store.SchemaVersion())
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil || h.Version < 1 || h.Schema < 1 || h.Runs < 0 {
		return header{}, fmt.Errorf("%w: header with format version %s, schema %s, %d runs", ErrCorrupt, v.Version, v.Schema, h.Runs)
	}
	h = header{}
	if err := strictDecode(line, &h); err != nil {
		return header{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return h, nil
}

// newer says whether a header's version number is past known.
func newer(n json.Number, known int) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return (err == nil || errors.Is(err, strconv.ErrRange)) && f > float64(known)
}

func readRun(lr *lineReader, rr runRecord) (store.CarriedRun, error) {
	if rr.Samples < 0 || rr.Failures < 0 || rr.Audits < 0 || rr.Loads < 0 {
		return store.CarriedRun{}, fmt.Errorf("%w: run %q announces %d samples, %d failures, %d audits, %d loads",
			ErrCorrupt, rr.Key, rr.Samples, rr.Failures, rr.Audits, rr.Loads)
	}
	cr := store.CarriedRun{
		Key: string(rr.Key), Origin: string(rr.Origin), ScenarioName: string(rr.ScenarioName),
		ScenarioSource: string(rr.ScenarioSource), ScenarioText: []byte(rr.ScenarioText), ScenarioHash: string(rr.ScenarioHash),
		Baseline: string(rr.Baseline), StartedNS: rr.StartedNS, FinishedNS: rr.FinishedNS, Status: string(rr.Status),
		StatusReason: string(rr.StatusReason), Host: rr.Host, Guests: rr.Guests, Dropped: rr.Dropped,
	}
	// The counts come from the file: the slices grow with what is really
	// there rather than being made at a size a damaged file could name.
	for range rr.Samples {
		rec, n, err := lr.record()
		if err != nil {
			return cr, err
		}
		sm := rec.Sample
		if sm == nil {
			return cr, fmt.Errorf("%w: line %d: want sample %d of run %q", ErrCorrupt, n, len(cr.Samples)+1, rr.Key)
		}
		hist := sm.Hist
		if string(hist) == "null" {
			hist = nil
		}
		cr.Samples = append(cr.Samples, store.CarriedSample{
			Guest: string(sm.Guest), Group: string(sm.Group), Kind: string(sm.Kind), Runtime: string(sm.Runtime),
			WorkloadID: string(sm.WorkloadID), Workload: string(sm.Workload), Params: sm.Params, Repetition: sm.Repetition,
			Metric: string(sm.Metric), Unit: string(sm.Unit), Value: float64(sm.Value), Better: string(sm.Better),
			AtNS: sm.AtNS, WallNS: sm.WallNS, CPUNS: sm.CPUNS, Hist: hist,
		})
	}
	for range rr.Failures {
		rec, n, err := lr.record()
		if err != nil {
			return cr, err
		}
		f := rec.Failure
		if f == nil {
			return cr, fmt.Errorf("%w: line %d: want failure %d of run %q", ErrCorrupt, n, len(cr.Failures)+1, rr.Key)
		}
		cr.Failures = append(cr.Failures, store.CarriedFailure{
			Guest: string(f.Guest), Group: string(f.Group), WorkloadID: string(f.WorkloadID), Repetition: f.Repetition,
			Error: string(f.Error), Stderr: string(f.Stderr), AtNS: f.AtNS,
		})
	}
	for range rr.Audits {
		rec, n, err := lr.record()
		if err != nil {
			return cr, err
		}
		a := rec.Audit
		if a == nil {
			return cr, fmt.Errorf("%w: line %d: want audit %d of run %q", ErrCorrupt, n, len(cr.Audits)+1, rr.Key)
		}
		cr.Audits = append(cr.Audits, store.CarriedAudit{
			Guest: string(a.Guest), Group: string(a.Group), Kind: string(a.Kind), Evidence: a.Evidence, AtNS: a.AtNS,
		})
	}
	for range rr.Loads {
		rec, n, err := lr.record()
		if err != nil {
			return cr, err
		}
		l := rec.Load
		if l == nil {
			return cr, fmt.Errorf("%w: line %d: want load %d of run %q", ErrCorrupt, n, len(cr.Loads)+1, rr.Key)
		}
		cr.Loads = append(cr.Loads, store.StepLoad{
			Guest: string(l.Guest), WorkloadID: string(l.WorkloadID), Repetition: l.Repetition, StartedNS: l.StartedNS, WallNS: l.WallNS,
			CPUs: l.CPUs, TotalTicks: l.TotalTicks, TaskTicks: l.TaskTicks, StealTicks: l.StealTicks, OwnNS: l.OwnNS,
		})
	}
	return cr, nil
}

// errEnded: the stream ended cleanly, but inside a line or before one.
var errEnded = errors.New("no newline before the end")

// lineReader reads the file's lines, each ended by a newline, keeping the
// sha256 of every line it returned.
type lineReader struct {
	br  *bufio.Reader
	sum hash.Hash
	n   int // lines read
	// decoded counts the bytes of the lines read, the reader stopping one
	// past MaxDecoded.
	decoded int64
}

// line returns the next line without its newline. A line cut short (the
// file ends inside it) is ErrCorrupt, as is a gzip stream that ends early
// or fails its checksum.
func (lr *lineReader) line() ([]byte, error) {
	var line []byte
	lr.n++
	for {
		chunk, err := lr.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxRecord {
			return nil, fmt.Errorf("%w: line %d is longer than %s", ErrTooLarge, lr.n, regfile.Bytes(maxRecord))
		}
		if lr.decoded+int64(len(line)) > MaxDecoded {
			return nil, fmt.Errorf("%w: it is over %s unzipped", ErrTooLarge, regfile.Bytes(MaxDecoded))
		}
		switch {
		case err == nil:
			lr.decoded += int64(len(line))
			lr.sum.Write(line)
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%w: it ends at line %d, before its trailer (truncated?): %w", ErrCorrupt, lr.n, errEnded)
		default:
			return nil, fmt.Errorf("%w: line %d: %w", ErrCorrupt, lr.n, err)
		}
	}
}

// record reads and decodes the next line, which must set exactly one of
// a record's fields.
func (lr *lineReader) record() (record, int, error) {
	line, err := lr.line()
	if err != nil {
		return record{}, lr.n, err
	}
	var rec record
	if err := strictDecode(line, &rec); err != nil {
		return record{}, lr.n, fmt.Errorf("%w: line %d: %w", ErrCorrupt, lr.n, err)
	}
	set := 0
	for _, isSet := range []bool{rec.Run != nil, rec.Sample != nil, rec.Failure != nil, rec.Audit != nil, rec.Load != nil, rec.End != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		return record{}, lr.n, fmt.Errorf("%w: line %d holds %d records, want one", ErrCorrupt, lr.n, set)
	}
	return rec, lr.n, nil
}

// atEnd checks that nothing follows the trailer, reading the gzip stream
// to its end, where its checksum is checked.
func (lr *lineReader) atEnd() error {
	n, err := io.Copy(io.Discard, lr.br)
	if err != nil {
		return fmt.Errorf("%w: after its trailer: %w", ErrCorrupt, err)
	}
	if n > 0 {
		return fmt.Errorf("%w: %d bytes after its trailer", ErrCorrupt, n)
	}
	return nil
}
