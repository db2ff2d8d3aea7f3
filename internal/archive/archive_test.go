package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fill stores runs that use every column the store has: a run with
// samples (a histogram among them, NaN and the infinities as values),
// failures (one with a stderr that is not UTF-8), an audit, its steps'
// host load, guests and a dropped group; a run without a key, as stored before runs had one; and
// an aborted run with nothing measured.
func fill(t testing.TB, st *store.Store) []int64 {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	full := &store.Run{
		ScenarioName: "default", ScenarioSource: "builtin:default", ScenarioText: []byte("name: default\n# <&>\n"),
		Baseline: "host", Started: start,
		Host: hostinfo.Fingerprint{Hostname: "bench1", Kernel: "6.1.0", Arch: "amd64", OnlineCPUs: 2,
			ToolVersions: map[string]string{"fio": "3.33"}},
		Dropped: []store.DroppedGroup{{Name: "kvm", Kind: "vm", Runtime: "q35", Reason: "no /dev/kvm"}},
	}
	id, err := st.CreateRun(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunKey(ctx, id, "r1-abcdef"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunGuests(ctx, id, map[string]store.GuestRecord{"c1": {Group: "c", Kind: "container", Runtime: "runc", CPULimit: 0.5}}); err != nil {
		t.Fatal(err)
	}
	hist := stats.NewHistogram("us")
	for _, v := range []float64{0, 87.5, 100, 2500.25, math.NaN()} {
		hist.Add(v)
	}
	base := store.Sample{Guest: "c1", Group: "c", Kind: "container", Runtime: "runc", WorkloadID: "fio-randread",
		Workload: "fio", Params: workload.Params{"rw": "randread", "html": "<a&b>"}, Repetition: 1, Metric: "read_clat_mean",
		Unit: "us", Better: workload.LowerIsBetter, At: start.Add(time.Second), WallNS: 3e9, CPUNS: 1e9}
	var samples []store.Sample
	for i, v := range []float64{123.45, math.NaN(), math.Inf(1), math.Inf(-1), 1e-310, math.MaxFloat64, 0.1 + 0.2} {
		sm := base
		sm.Repetition, sm.Value = i, v
		if i == 0 {
			sm.Hist = hist
		}
		samples = append(samples, sm)
	}
	if err := st.AddSamples(ctx, id, samples); err != nil {
		t.Fatal(err)
	}
	for _, f := range []store.Failure{
		{RunID: id, Guest: "c1", Group: "c", WorkloadID: "cpu", Repetition: 2, Error: "exit status 1", Stderr: "cut \xe2\x82", At: start.Add(2 * time.Second)},
		{RunID: id, Guest: "c1", Group: "c", WorkloadID: "cpu", Repetition: 3, Error: "exit status 2", Stderr: "ok"},
	} {
		if err := st.AddFailure(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddAudits(ctx, id, []store.AuditRecord{
		{Guest: "", Group: "", Kind: "host", Evidence: json.RawMessage(`{"pid_ns":"4026531836"}`)},
		{Guest: "c1", Group: "c", Kind: "container", Evidence: json.RawMessage(`{"pid_ns":"4026532000"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []store.StepLoad{
		{Guest: "c1", WorkloadID: "fio-randread", Repetition: 0, StartedNS: start.UnixNano(), WallNS: 3e9, CPUs: 2,
			TotalTicks: 600, TaskTicks: 410, StealTicks: 12, OwnNS: 3.1e9},
		{WorkloadID: "cpu", Repetition: 1, StartedNS: start.UnixNano() + 4e9, WallNS: 1e9, CPUs: 2, TotalTicks: 200, TaskTicks: 200},
	} {
		if err := st.AddStepLoad(ctx, id, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishRun(ctx, id, store.StatusCompleteWithFailures, "2 of 9 steps failed", start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	keyless := &store.Run{ScenarioName: "old", ScenarioSource: "file:old.yaml", ScenarioText: []byte("name: old\n"),
		Baseline: "host", Started: start.Add(-time.Hour), Host: hostinfo.Fingerprint{Hostname: "bench0"}}
	old, err := st.CreateRun(ctx, keyless)
	if err != nil {
		t.Fatal(err)
	}
	sm := base
	sm.Value = 7
	if err := st.AddSamples(ctx, old, []store.Sample{sm}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, old, store.StatusComplete, "", start.Add(-time.Hour+time.Minute)); err != nil {
		t.Fatal(err)
	}

	empty := &store.Run{ScenarioName: "none", ScenarioText: []byte{}, Baseline: "host", Started: start.Add(time.Hour)}
	aborted, err := st.CreateRun(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunKey(ctx, aborted, "r3-000000"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AbortRun(ctx, aborted, "its vfleet (pid 1) ended without finishing it", start.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	return []int64{id, old, aborted}
}

func export(t testing.TB, st *store.Store, ids ...int64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Export(context.Background(), st, ids, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func importFile(t testing.TB, st *store.Store, file []byte, opts ImportOptions) []Imported {
	t.Helper()
	got, err := Import(context.Background(), st, bytes.NewReader(file), opts)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ids(imported []Imported) []int64 {
	var out []int64
	for _, im := range imported {
		out = append(out, im.ID)
	}
	return out
}

// contents is everything the store returns about its runs but their ids,
// owners and origins, which are the store's own; the sample values are
// given apart, as text, so that a NaN equals a NaN.
func contents(t testing.TB, st *store.Store) []any {
	t.Helper()
	ctx := context.Background()
	list, err := st.ListRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, rs := range list {
		r, err := st.GetRun(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		r.ID, r.Owner, r.Origin = 0, procfs.Process{}, ""
		samples, err := st.Samples(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		var values []string
		for i := range samples {
			values = append(values, fmt.Sprint(samples[i].Value))
			samples[i].RunID, samples[i].Value = 0, 0
		}
		failures, err := st.Failures(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		for i := range failures {
			failures[i].RunID = 0
		}
		audits, err := st.Audits(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		loads, err := st.StepLoads(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r, samples, values, failures, audits, loads)
	}
	return out
}

// rowCounts is how many runs, samples, failures and audits st holds.
func rowCounts(t testing.TB, st *store.Store) [4]int {
	t.Helper()
	ctx := context.Background()
	list, err := st.ListRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := [4]int{len(list)}
	for _, rs := range list {
		audits, err := st.Audits(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		n[1] += rs.Samples
		n[2] += rs.Failures
		n[3] += len(audits)
	}
	return n
}

func TestRoundTripIsExact(t *testing.T) {
	a := openStore(t)
	first := export(t, a, fill(t, a)...)

	b := openStore(t)
	imported := importFile(t, b, first, ImportOptions{})
	if len(imported) != 3 || imported[0].Key != "r1-abcdef" || imported[2].Key != "r3-000000" || !strings.HasPrefix(imported[1].Key, "k-") {
		t.Fatalf("imported %+v", imported)
	}
	again := export(t, b, ids(imported)...)
	if !bytes.Equal(first, again) {
		t.Fatalf("exported again, the file differs:\n%s\n%s", unzip(t, first), unzip(t, again))
	}
	// The run stored without a key has the one it was exported with.
	want := contents(t, a)
	keyless := want[6].(store.Run)
	keyless.Key = imported[1].Key
	want[6] = keyless
	if got := contents(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("imported store holds\n%+v\nthe exporting one\n%+v", got, want)
	}
	// The keyless run's key is derived from the run: exported again from
	// its own store, it is the same file.
	if twice := export(t, a, 1, 2, 3); !bytes.Equal(first, twice) {
		t.Fatal("the same runs exported twice differ")
	}
}

func TestImportTwiceIsNoOp(t *testing.T) {
	a := openStore(t)
	file := export(t, a, fill(t, a)...)
	b := openStore(t)
	first := importFile(t, b, file, ImportOptions{})
	counts := rowCounts(t, b)
	second := importFile(t, b, file, ImportOptions{Origin: "ssh://root@198.18.0.2:22"})
	for i := range first {
		if first[i].Existed || !second[i].Existed || second[i].ID != first[i].ID || second[i].Key != first[i].Key {
			t.Fatalf("first import %+v, second %+v", first, second)
		}
	}
	if got := rowCounts(t, b); got != counts {
		t.Fatalf("the second import changed the store: %v rows, were %v", got, counts)
	}
	// A run repeated in the request is exported once.
	if got := importFile(t, openStore(t), export(t, a, 1, 1), ImportOptions{}); len(got) != 1 {
		t.Fatalf("imported %+v from a file of run 1 twice", got)
	}
}

func TestImportOrigin(t *testing.T) {
	a := openStore(t)
	file := export(t, a, fill(t, a)[:2]...)
	ctx := context.Background()

	b := openStore(t)
	for i, im := range importFile(t, b, file, ImportOptions{}) {
		r, err := b.GetRun(ctx, im.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"host:bench1", "host:bench0"}[i]; r.Origin != want {
			t.Fatalf("run %d imported with origin %q, want the file's %q", im.ID, r.Origin, want)
		}
	}
	c := openStore(t)
	const from = "ssh://root@198.18.0.2:22"
	for _, im := range importFile(t, c, file, ImportOptions{Origin: from}) {
		r, err := c.GetRun(ctx, im.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Origin != from {
			t.Fatalf("run %d imported with origin %q, want %q", im.ID, r.Origin, from)
		}
		if r.Owner.PID != 0 {
			t.Fatalf("run %d imported with the exporter's owner %+v", im.ID, r.Owner)
		}
	}
}

func TestRunningRunIsNotExported(t *testing.T) {
	st := openStore(t)
	id, err := st.CreateRun(context.Background(), &store.Run{ScenarioName: "s", ScenarioText: []byte("x"), Baseline: "host"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Export(context.Background(), st, []int64{id}, &b); !errors.Is(err, ErrRunning) || b.Len() != 0 {
		t.Fatalf("exporting a running run: %v, %d bytes written", err, b.Len())
	}
	if err := Export(context.Background(), st, []int64{id + 1}, &b); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("exporting a run that does not exist: %v", err)
	}
}

func unzip(t testing.TB, file []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rezip(t testing.TB, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	if _, err := gz.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// refused imports file into a store holding runs, and fails unless the
// import fails with want and leaves the store as it was.
func refused(t *testing.T, st *store.Store, file []byte, want error) error {
	t.Helper()
	before := rowCounts(t, st)
	_, err := Import(context.Background(), st, bytes.NewReader(file), ImportOptions{})
	if !errors.Is(err, want) {
		t.Fatalf("import: %v, want %v", err, want)
	}
	if got := rowCounts(t, st); got != before {
		t.Fatalf("a refused file changed the store: %v rows, were %v", got, before)
	}
	return err
}

func TestNewerFileIsRefusedWithTheVersions(t *testing.T) {
	a := openStore(t)
	plain := unzip(t, export(t, a, fill(t, a)...))
	b := openStore(t)
	for _, tc := range []struct {
		from, to string
		says     []string
	}{
		{`"version":1,`, `"version":2,`, []string{"format is version 2", "up to version 1"}},
		{`"version":1,`, `"version":1e300,`, []string{"format is version 1e300", "up to version 1"}},
		{`"version":1,`, `"version":1e400,`, []string{"format is version 1e400", "up to version 1"}},
		{`"schema":`, `"schema":1e300,"x":`, []string{"schema version 1e300"}},
		{fmt.Sprintf(`"schema":%d,`, store.CarriedSchemaVersion()), fmt.Sprintf(`"schema":%d,`, store.SchemaVersion()+1),
			[]string{fmt.Sprintf("schema version %d", store.SchemaVersion()+1), fmt.Sprintf("up to version %d", store.SchemaVersion())}},
	} {
		newer := bytes.Replace(plain, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(newer, plain) {
			t.Fatalf("no %s in the header", tc.from)
		}
		err := refused(t, b, rezip(t, newer), ErrTooNew)
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%v: does not say %q", err, s)
			}
		}
	}
}

// A file records the schema of the runs it carries, not the whole
// store's, which a migration of a table no run carries (baselines) moves:
// the vfleets that know the runs' schema read it, and a file that names
// the whole store's, as vfleets wrote before, is read as well.
func TestFileSchemaIsTheRunsOwn(t *testing.T) {
	a := openStore(t)
	file := export(t, a, fill(t, a)...)
	plain := unzip(t, file)
	var h header
	if err := json.Unmarshal(plain[:bytes.IndexByte(plain, '\n')], &h); err != nil {
		t.Fatal(err)
	}
	if h.Schema != store.CarriedSchemaVersion() {
		t.Fatalf("the header says schema %d; want the runs' %d (the store is at %d)", h.Schema, store.CarriedSchemaVersion(), store.SchemaVersion())
	}
	whole := bytes.Replace(plain, []byte(fmt.Sprintf(`"schema":%d,`, h.Schema)), []byte(fmt.Sprintf(`"schema":%d,`, store.SchemaVersion())), 1)
	if got := importFile(t, openStore(t), rezip(t, withSum(whole)), ImportOptions{}); len(got) != 3 {
		t.Fatalf("a file naming the store's schema: imported %+v", got)
	}
}

func TestDamagedFileIsRefusedAndStoreUnchanged(t *testing.T) {
	a := openStore(t)
	file := export(t, a, fill(t, a)...)
	plain := unzip(t, file)
	b := openStore(t)
	importFile(t, b, export(t, a, 3), ImportOptions{}) // the store is not empty

	for _, cut := range []int{len(file) - 1, len(file) - 8, len(file) / 2, 20} {
		refused(t, b, file[:cut], ErrCorrupt)
	}
	// Whole lines cut off, each gzip'd properly: the sum or the counts tell.
	lines := bytes.SplitAfter(plain, []byte("\n"))
	for n := 1; n < len(lines)-1; n++ {
		refused(t, b, rezip(t, bytes.Join(lines[:n], nil)), ErrCorrupt)
	}
	// A changed value, the file otherwise well formed.
	forged := bytes.Replace(plain, []byte(`"value":123.45`), []byte(`"value":123.46`), 1)
	if bytes.Equal(forged, plain) {
		t.Fatal("no value 123.45 in the file")
	}
	refused(t, b, rezip(t, forged), ErrCorrupt)
	// A flipped byte in the compressed stream.
	flipped := bytes.Clone(file)
	flipped[len(flipped)/2] ^= 0x20
	refused(t, b, flipped, ErrCorrupt)
	// Something after the trailer.
	refused(t, b, rezip(t, append(bytes.Clone(plain), "{}\n"...)), ErrCorrupt)
	refused(t, b, append(bytes.Clone(file), rezip(t, []byte("x\n"))...), ErrCorrupt)
	// Not this format at all.
	refused(t, b, []byte("name: default\n"), ErrNotArchive)
	refused(t, b, rezip(t, []byte(`{"format":"other","version":1}`+"\n")), ErrNotArchive)
	refused(t, b, nil, ErrNotArchive)
	refused(t, b, rezip(t, []byte("no newline")), ErrNotArchive)
	for _, err := range []error{
		refused(t, b, file[:20], ErrCorrupt), refused(t, b, rezip(t, []byte("x")), ErrNotArchive),
	} {
		if errors.Is(err, ErrNotArchive) == errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: either damaged or not a runs file, not both", err)
		}
	}
}

// A whole file (its sum matches) holding a run the store refuses is
// refused naming that run, not as damaged, and nothing of it is kept.
func TestInvalidRunIsRefusedWholeFile(t *testing.T) {
	a := openStore(t)
	plain := unzip(t, export(t, a, fill(t, a)...))
	b := openStore(t)
	for _, tc := range []struct{ from, to, key, says string }{
		{`"status":"aborted"`, `"status":"running"`, "r3-000000", `status "running"`},
		{`"scenario_hash":"`, `"scenario_hash":"0`, "r1-abcdef", "scenario hash"},
		{`"params":{"html"`, `"params":{"html":1,"h"`, "r1-abcdef", "sample 1: params"},
		{`"scale":64`, `"scale":63`, "r1-abcdef", "the histogram of fio-randread read_clat_mean"},
		{`"finished_ns":1795341660123456789`, `"finished_ns":1795341500123456789`, "r1-abcdef", "finished_ns 1795341500123456789 is before started_ns"},
		{`"started_ns":1795341600123456789`, `"started_ns":-1`, "r1-abcdef", "started_ns -1: want a time since 1970"},
		{`"finished_ns":1795341660123456789`, `"finished_ns":-5`, "r1-abcdef", "finished_ns -5: want"},
		{`"repetition":0,`, `"repetition":-1,`, "r1-abcdef", "sample 1: repetition -1: want 0 or more"},
		{`"wall_ns":3000000000`, `"wall_ns":-3`, "r1-abcdef", "sample 1: wall_ns -3: want 0 or more"},
		{`"better":"lower"`, `"better":"sideways"`, "r1-abcdef", `sample 1: better "sideways": want "higher" or "lower"`},
		{`"guest":"c1","group":"c","kind":"container","runtime":"runc","workload_id":"fio-randread"`,
			`"guest":"c9","group":"c","kind":"container","runtime":"runc","workload_id":"fio-randread"`, "r1-abcdef", `sample 1: guest "c9": want one of the run's guests (c1)`},
		{`"repetition":2,"error"`, `"repetition":-2,"error"`, "r1-abcdef", "failure 1: repetition -2"},
		{`"evidence":{"pid_ns":"4026531836"},"at_ns":1`, `"evidence":{"pid_ns":"4026531836"},"at_ns":-1`, "r1-abcdef", "audit 1: at_ns -1"},
		{`"cpus":2,"total_ticks":600`, `"cpus":0,"total_ticks":600`, "r1-abcdef", "host load 1: cpus 0: want 1 or more"},
		{`"task_ticks":410,"steal_ticks":12`, `"task_ticks":610,"steal_ticks":12`, "r1-abcdef", "host load 1: task_ticks 610 and steal_ticks 12 exceed total_ticks 600"},
		{`"steal_ticks":12,"own_ns":3100000000`, `"steal_ticks":12,"own_ns":-1`, "r1-abcdef", "host load 1: own_ns -1: want 0 or more"},
	} {
		forged := bytes.Replace(plain, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(forged, plain) {
			t.Fatalf("no %s in the file", tc.from)
		}
		err := refused(t, b, rezip(t, withSum(forged)), ErrCannotImport)
		if errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "run "+tc.key+" cannot be imported: ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want run %s cannot be imported, saying %q, and not damaged", tc.to, err, tc.key, tc.says)
		}
	}
}

// A run whose key the store holds is kept as stored; the import says
// whether the file's is the same.
func TestSameKeyOtherContentIsNamed(t *testing.T) {
	a := openStore(t)
	file := export(t, a, fill(t, a)...)
	b := openStore(t)
	importFile(t, b, file, ImportOptions{})
	before := contents(t, b)
	for _, im := range importFile(t, b, file, ImportOptions{Origin: "ssh://root@bench9:22"}) {
		if !im.Existed || im.Differs {
			t.Errorf("the same file again, another origin: %+v", im)
		}
	}
	forged := bytes.Replace(unzip(t, file), []byte(`"value":123.45`), []byte(`"value":123.46`), 1)
	for _, im := range importFile(t, b, rezip(t, withSum(forged)), ImportOptions{}) {
		if want := im.Key == "r1-abcdef"; !im.Existed || im.Differs != want {
			t.Errorf("a file with run r1-abcdef altered: %+v, want Differs %v", im, want)
		}
	}
	if !reflect.DeepEqual(contents(t, b), before) {
		t.Error("the stored runs changed")
	}
}

func TestTextAndNumbersRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "<&>", "\xff\xfe", "cut \xe2\x82", "\x00nul", "\u2028"} {
		b, err := json.Marshal(text(s))
		if err != nil {
			t.Fatal(err)
		}
		var back text
		if err := json.Unmarshal(b, &back); err != nil || string(back) != s {
			t.Fatalf("text %q: written %s, read back %q, %v", s, b, back, err)
		}
	}
	for _, v := range []float64{0, 1, -1.5, 0.1 + 0.2, 5e-324, math.MaxFloat64, -math.MaxFloat64, 1e21, 1e-7, math.Inf(1), math.Inf(-1)} {
		b, err := json.Marshal(number(v))
		if err != nil {
			t.Fatal(err)
		}
		var back number
		if err := json.Unmarshal(b, &back); err != nil || float64(back) != v {
			t.Fatalf("value %v: written %s, read back %v, %v", v, b, back, err)
		}
	}
	var back number
	if err := json.Unmarshal([]byte(`"NaN"`), &back); err != nil || !math.IsNaN(float64(back)) {
		t.Fatalf("NaN read back as %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`"Infinity"`), &back); err == nil {
		t.Fatal(`"Infinity" taken for a value`)
	}
}

// A run stored without a key goes out under a key derived from it, which
// its own row never gets (export only reads): imported back into the
// store it came from, it is found there, not added a second time.
func TestKeylessRunImportedBackIsFound(t *testing.T) {
	st := openStore(t)
	runs := fill(t, st)
	counts := rowCounts(t, st)
	got := importFile(t, st, export(t, st, runs...), ImportOptions{})
	for i, im := range got {
		if !im.Existed || im.ID != runs[i] {
			t.Errorf("run %d came back as %+v; want it found as itself", runs[i], im)
		}
	}
	if after := rowCounts(t, st); after != counts {
		t.Fatalf("importing its own runs changed the store: %v rows, were %v", after, counts)
	}
}

// A file written before steps' host load was carried (schema 7, no load
// records, no counts of them) still imports, its runs with no load: not
// read, rather than an idle host.
func TestFileBeforeLoadsImports(t *testing.T) {
	old, err := os.ReadFile("testdata/runs-schema7.vfr")
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	imported := importFile(t, st, old, ImportOptions{})
	if len(imported) != 3 {
		t.Fatalf("imported %+v", imported)
	}
	for _, im := range imported {
		if loads, err := st.StepLoads(context.Background(), im.ID); err != nil || len(loads) != 0 {
			t.Errorf("run %s: loads %+v, %v; want none", im.Key, loads, err)
		}
	}
}
