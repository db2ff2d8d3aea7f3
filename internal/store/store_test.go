package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/workload"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func latencies(unit string, values ...float64) *stats.Histogram {
	h := stats.NewHistogram(unit)
	for _, v := range values {
		h.Add(v)
	}
	return h
}

func newStore(t *testing.T) *Store {
	t.Helper()
	return open(t, filepath.Join(t.TempDir(), "r.db"))
}

func newRun() *Run {
	return &Run{
		ScenarioName: "default", ScenarioSource: "builtin:default", ScenarioText: []byte("name: default\n"),
		Baseline: "host",
		Started:  time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC),
	}
}

func createRun(t *testing.T, s *Store) int64 {
	t.Helper()
	id, err := s.CreateRun(context.Background(), newRun())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// requireAllSet fails when a field of v is zero, so that a field added to a
// stored type later cannot be forgotten by the store and by this test alike.
func requireAllSet(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := 0; i < rv.NumField(); i++ {
		if rv.Field(i).IsZero() {
			t.Fatalf("%T.%s is not set in the round-trip fixture", v, rv.Type().Field(i).Name)
		}
	}
}

func TestRoundTripEveryField(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	host := hostinfo.Fingerprint{
		Hostname: "bench1", MachineID: "3d1219c7c4c5404a", Kernel: "6.1.0", KernelFull: "#1 SMP", Arch: "amd64", CPUModel: "Test CPU",
		Microcode: "0xde", OnlineCPUs: 2, SMT: "on", Governor: "performance", MemTotalKiB: 1 << 20,
		CgroupMode: "v2", Virtualized: "kvm", VfleetVer: "0.1.0", ToolVersions: map[string]string{"fio": "3.33"},
		RealTime: hostinfo.RealTime{Preemption: "dynamic", RTRuntimeUS: 950000, RTPeriodUS: 1000000, IsolatedCPUs: "1",
			NohzFull: "1", IRQsPerCPU: map[int]int{0: 3, 1: 0}, Tracers: map[string]string{"timerlat": hostinfo.TracerAbsent}, SetByRun: []string{"sched_rt_runtime_us=-1"}},
		NIC: &hostinfo.NIC{Name: "eth1", Driver: "ixgbe", Version: "6.1.0", Firmware: "0x800006a5", Offloads: map[string]string{"tcp-segmentation-offload": "on"}},
	}
	requireAllSet(t, host)
	requireAllSet(t, *host.NIC)
	requireAllSet(t, host.RealTime)
	in := newRun()
	in.Host = host
	in.Owner = procfs.Process{PID: 4242, StartTime: 1 << 40}
	in.Origin = "ssh://root@198.18.0.9:22"
	in.Dropped = []DroppedGroup{{Name: "kvm", Kind: "vm", Runtime: "q35", Reason: "not supported on this host: accel kvm: no /dev/kvm"}}
	requireAllSet(t, in.Dropped[0])
	id, err := s.CreateRun(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	guest := GuestRecord{Group: "container", Kind: "container", Runtime: "runc", CPUs: "1", Memory: 1 << 30,
		CPULimit: 0.5, BootNS: 42, Details: map[string]string{"cgroup": "/vfleet/1"}}
	requireAllSet(t, guest)
	guests := map[string]GuestRecord{"container": guest}
	if err := s.SetRunGuests(ctx, id, guests); err != nil {
		t.Fatal(err)
	}
	sample := Sample{RunID: id, Guest: "container", Group: "container", Kind: "container", Runtime: "runc",
		WorkloadID: "fio-randread", Workload: "fio", Params: workload.Params{"rw": "randread"}, Repetition: 2,
		Metric: "read_clat_mean", Unit: "us", Value: 123.45, Better: workload.LowerIsBetter,
		At: time.Date(2026, 11, 22, 10, 0, 1, 987654321, time.UTC), WallNS: 3e9, CPUNS: 1e9,
		Hist: latencies("us", 0, 87.5, 100, 123.4, 2500.25, math.NaN())}
	requireAllSet(t, sample)
	// A scalar next to it keeps no histogram.
	scalar := Sample{RunID: id, Guest: "container", Group: "container", Metric: "read_iops", Unit: "IOPS", Value: 8100}
	if err := s.AddSamples(ctx, id, []Sample{sample, scalar}); err != nil {
		t.Fatal(err)
	}
	fail := Failure{RunID: id, Guest: "host", Group: "host", WorkloadID: "cpu", Repetition: 1,
		Error: "exit status 1", Stderr: "boom", At: sample.At}
	requireAllSet(t, fail)
	if err := s.AddFailure(ctx, fail); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunKey(ctx, id, "r1-abcdef"); err != nil {
		t.Fatal(err)
	}
	finished := in.Started.Add(time.Minute)
	if err := s.FinishRun(ctx, id, StatusCompleteWithFailures, "1 of 2 steps failed", finished); err != nil {
		t.Fatal(err)
	}

	got, err := s.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := *in
	want.Status, want.StatusReason, want.Finished, want.Guests, want.Key = StatusCompleteWithFailures, "1 of 2 steps failed", finished, guests, "r1-abcdef"
	requireAllSet(t, want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("run round trip:\n got %+v\nwant %+v", got, want)
	}
	samples, err := s.Samples(ctx, id)
	if err != nil || len(samples) != 2 || !reflect.DeepEqual(samples[0], sample) || !reflect.DeepEqual(samples[1], scalar) {
		t.Fatalf("samples = %+v, %v; want [%+v %+v]", samples, err, sample, scalar)
	}
	if h := samples[0].Hist; h.Count() != 5 || h.Invalid() != 1 || h.Max() != 2500.25 || h.Unit() != "us" {
		t.Fatalf("histogram read back with count %d invalid %d max %v unit %q", h.Count(), h.Invalid(), h.Max(), h.Unit())
	}
	fails, err := s.Failures(ctx, id)
	if err != nil || len(fails) != 1 || !reflect.DeepEqual(fails[0], fail) {
		t.Fatalf("failures = %+v, %v; want [%+v]", fails, err, fail)
	}
}

func TestCreateRunComputesOrChecksHash(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	r := newRun()
	if _, err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	// sha256 of "name: default\n", computed independently.
	const want = "505ae288295c265cadf1fbaacddf554d7c3dc9978a0a93e2ea7acc1d035c63d0"
	if r.ScenarioHash != want || r.Status != StatusRunning {
		t.Fatalf("hash %s status %s; want %s running", r.ScenarioHash, r.Status, want)
	}
	bad := newRun()
	bad.ScenarioHash = "0000"
	if _, err := s.CreateRun(ctx, bad); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("err = %v, want ErrHashMismatch", err)
	}
}

func TestTimesAndSpecialValuesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	r := newRun()
	r.Started = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	id, err := s.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Started.Equal(r.Started) || got.Started.Location() != time.UTC || !got.Finished.IsZero() || got.Guests != nil {
		t.Fatalf("started %v finished %v guests %v; want the same instant in UTC, zero, nil",
			got.Started, got.Finished, got.Guests)
	}

	values := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1.5e-300, math.MaxFloat64}
	var in []Sample
	for _, v := range values {
		in = append(in, Sample{Metric: "m", Value: v})
	}
	if err := s.AddSamples(ctx, id, in); err != nil {
		t.Fatal(err)
	}
	out, err := s.Samples(ctx, id)
	if err != nil || len(out) != len(values) {
		t.Fatalf("samples = %+v, %v", out, err)
	}
	for i, v := range values {
		if g := out[i].Value; g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
			t.Errorf("value %d = %v, want %v", i, g, v)
		}
		if !out[i].At.IsZero() || out[i].Params != nil {
			t.Errorf("sample %d: unset At/Params came back as %v/%v", i, out[i].At, out[i].Params)
		}
	}
}

func TestListRuns(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	first, second := createRun(t, s), createRun(t, s)
	if err := s.AddSamples(ctx, second, []Sample{{Metric: "a"}, {Metric: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddFailure(ctx, Failure{RunID: first, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []RunSummary{
		{ID: first, ScenarioName: "default", Started: newRun().Started, Status: StatusRunning, Failures: 1},
		{ID: second, ScenarioName: "default", Started: newRun().Started, Status: StatusRunning, Samples: 2},
	}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("list:\n got %+v\nwant %+v", list, want)
	}
}

func TestInterruptedRunKeepsSamplesAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id := createRun(t, s)
	for rep := 0; rep < 3; rep++ {
		if err := s.AddSamples(ctx, id, []Sample{{Guest: "host", Metric: "m", Value: float64(rep), Repetition: rep}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // the process dies without FinishRun

	s = open(t, path)
	r, err := s.GetRun(ctx, id)
	if err != nil || r.Status != StatusRunning || !r.Finished.IsZero() {
		t.Fatalf("run after reopen = %+v, %v", r, err)
	}
	samples, err := s.Samples(ctx, id)
	if err != nil || len(samples) != 3 {
		t.Fatalf("samples after reopen = %+v, %v", samples, err)
	}
	for i, sm := range samples {
		if sm.Repetition != i || sm.Value != float64(i) {
			t.Fatalf("sample %d = %+v, out of insertion order", i, sm)
		}
	}
}

func TestReopenIsIdempotentAndFutureSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	for i := 0; i < 3; i++ {
		s, err := Open(path)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		var n, max int
		if err := s.db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
			t.Fatal(err)
		}
		if n != len(migrations) || max != len(migrations) {
			t.Fatalf("open #%d: %d migrations recorded up to %d, want %d", i+1, n, max, len(migrations))
		}
		s.Close()
	}

	s := open(t, path)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestNonDatabaseFileRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"notes.txt": "my precious notes, not a database\n",
		"short":     "x",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path)
		if !errors.Is(err, ErrNotDatabase) {
			t.Fatalf("%s: err = %v, want ErrNotDatabase", name, err)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
		if after, _ := os.ReadFile(path); string(after) != content {
			t.Fatalf("%s: refused file was modified", name)
		}
	}
}

func TestOtherProgramsDatabaseRefusedUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "places.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE bookmarks (url TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("err = %v, want ErrNotDatabase", err)
	}
	// Byte for byte: switching it to WAL would already rewrite its header.
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the refused database was modified (%v)", err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a WAL file was created next to the refused database: %v", err)
	}
}

func TestOpenCreatesPrivateFileWithOddPathAndPragmas(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new dir?#%", "nested")
	path := filepath.Join(dir, "r.db")
	s := open(t, path)
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s mode %v, want %v", p, st.Mode(), want)
		}
	}
	var mode string
	var fk, busy int
	for q, dst := range map[string]any{"PRAGMA journal_mode": &mode, "PRAGMA foreign_keys": &fk, "PRAGMA busy_timeout": &busy} {
		if err := s.db.QueryRow(q).Scan(dst); err != nil {
			t.Fatal(err)
		}
	}
	if mode != "wal" || fk != 1 || busy != int(busyTimeout.Milliseconds()) {
		t.Fatalf("journal_mode %q foreign_keys %d busy_timeout %d", mode, fk, busy)
	}
}

// A new database whose creation fails is not left behind, empty, for the
// next command to open as if it were one; the next open creates it whole.
func TestFailedCreationLeavesNoDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.db")
	all := migrations
	migrations = append(slices.Clip(all), "THIS IS NOT SQL")
	_, err := Open(path)
	migrations = all
	if err == nil {
		t.Fatal("a broken migration opened")
	}
	if des, err := os.ReadDir(dir); err != nil || len(des) != 0 {
		t.Fatalf("after the failed creation the directory holds %v (%v), want nothing", des, err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListRuns(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// oldDatabase makes a database of an older schema version, as an older
// vfleet left it, with one run in it written with that version's columns.
func oldDatabase(t *testing.T, path string, version int) (*Store, int64) {
	t.Helper()
	all := migrations
	migrations = all[:version]
	old, err := Open(path)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	res, err := old.db.Exec(`INSERT INTO runs (scenario_name, scenario_source, scenario_text, scenario_hash, baseline, started_ns, status, host_json)
		VALUES ('old', 'old.yaml', 'name: old', '', 'host', 1, 'complete', '{}')`)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return old, id
}

// TestVersion1DatabaseGainsHistograms opens a database written before the
// histograms table existed: its samples must survive the migration and read
// back without histograms, and new samples can carry one.
func TestVersion1DatabaseGainsHistograms(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	old, id := oldDatabase(t, path, 1)
	if err := old.AddSamples(ctx, id, []Sample{{Metric: "rtt", Unit: "us", Value: 12}}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s := open(t, path)
	if err := s.AddSamples(ctx, id, []Sample{{Metric: "rtt", Unit: "us", Value: 13, Hist: latencies("us", 12, 13, 14)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Samples(ctx, id)
	if err != nil || len(got) != 2 || got[0].Hist != nil || got[1].Hist == nil || got[1].Hist.Count() != 3 {
		t.Fatalf("samples after migration = %+v, %v", got, err)
	}
}

// A run stored before optional groups existed dropped none.
func TestVersion4RunHasNoDroppedGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	old, id := oldDatabase(t, path, 4)
	old.Close()
	got, err := open(t, path).GetRun(context.Background(), id)
	if err != nil || len(got.Dropped) != 0 {
		t.Fatalf("run of a version 4 database: dropped %+v, %v; want none", got.Dropped, err)
	}
}

// A run stored before runs had an origin was measured on the store's host.
func TestVersion6RunIsOfThisHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	old, id := oldDatabase(t, path, 6)
	old.Close()
	s := open(t, path)
	got, err := s.GetRun(context.Background(), id)
	if err != nil || got.Origin != "" {
		t.Fatalf("run of a version 6 database: origin %q, %v; want none", got.Origin, err)
	}
	list, err := s.ListRuns(context.Background())
	if err != nil || len(list) != 1 || list[0].Origin != "" {
		t.Fatalf("runs of a version 6 database: %+v, %v", list, err)
	}
}

// TestDamagedHistogramIsAnError: a histogram that does not decode must fail
// the read, naming the sample, rather than give wrong percentiles.
func TestDamagedHistogramIsAnError(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	id := createRun(t, s)
	if err := s.AddSamples(ctx, id, []Sample{{WorkloadID: "ping", Metric: "rtt", Unit: "us", Hist: latencies("us", 1, 2)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`UPDATE histograms SET hist_json = '{"unit":"us","scale":64,"count":9,"min":1,"max":2,"sum":3,"sumsq":5,"buckets":[]}'`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Samples(ctx, id)
	if !errors.Is(err, stats.ErrHistogram) || !strings.Contains(err.Error(), "ping rtt") {
		t.Fatalf("err = %v, want stats.ErrHistogram naming the sample", err)
	}
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const missing = 99
	if _, err := s.GetRun(ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun: %v", err)
	}
	if err := s.FinishRun(ctx, missing, StatusComplete, "", time.Now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun: %v", err)
	}
	if err := s.SetRunGuests(ctx, missing, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetRunGuests: %v", err)
	}
	if err := s.AddSamples(ctx, missing, []Sample{{Metric: "m"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddSamples: %v", err)
	}
	if err := s.AddFailure(ctx, Failure{RunID: missing}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddFailure: %v", err)
	}
}

func TestResolveRun(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.ResolveRun(ctx, "latest"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest on an empty store: %v", err)
	}
	first, second := createRun(t, s), createRun(t, s)
	for ref, want := range map[string]int64{"latest": second, fmt.Sprint(first): first} {
		got, err := s.ResolveRun(ctx, ref)
		if err != nil || got != want {
			t.Errorf("ResolveRun(%q) = %d, %v; want %d", ref, got, err, want)
		}
	}
	for _, ref := range []string{"99", "x", "-1", "0", "", "Latest"} {
		if _, err := s.ResolveRun(ctx, ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveRun(%q) err = %v, want ErrNotFound", ref, err)
		}
	}
}

// TestConcurrentAddSamples writes from several goroutines through two
// handles on one file, as a run and a second vfleet process would.
func TestConcurrentAddSamples(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	handles := []*Store{open(t, path), open(t, path)}
	id := createRun(t, handles[0])
	const writers, steps = 8, 10
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < steps; i++ {
				step := []Sample{{Guest: fmt.Sprint(g), Repetition: i, Metric: "a"}, {Guest: fmt.Sprint(g), Repetition: i, Metric: "b"}}
				if err := handles[g%2].AddSamples(ctx, id, step); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	samples, err := handles[1].Samples(ctx, id)
	if err != nil || len(samples) != writers*steps*2 {
		t.Fatalf("%d samples (%v), want %d", len(samples), err, writers*steps*2)
	}
	next := map[string]int{}
	for i := 0; i < len(samples); i += 2 {
		a, b := samples[i], samples[i+1]
		if a.Metric != "a" || b.Metric != "b" || a.Guest != b.Guest || a.Repetition != b.Repetition {
			t.Fatalf("step split by another writer at %d: %+v %+v", i, a, b)
		}
		if a.Repetition != next[a.Guest] {
			t.Fatalf("writer %s: step %d stored before step %d", a.Guest, a.Repetition, next[a.Guest])
		}
		next[a.Guest]++
	}
}

// TestConcurrentOpenOfNewDatabase is several stores starting at once on a
// fresh file: each must open, and each migration must be applied once.
func TestConcurrentOpenOfNewDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := Open(path)
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		}()
	}
	close(start)
	wg.Wait()
	requireMigratedOnce(t, path)
}

func requireMigratedOnce(t *testing.T, path string) {
	t.Helper()
	s := open(t, path)
	var n, max int
	if err := s.db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || max != len(migrations) {
		t.Fatalf("%d migrations recorded up to version %d, want each of 1..%d once", n, max, len(migrations))
	}
}

// openChildEnv names the database a re-executed test binary opens; see
// TestConcurrentOpenByProcesses.
const openChildEnv = "VFLEET_STORE_TEST_OPEN"

// TestConcurrentOpenByProcesses is the real case behind the test above: two
// vfleet processes creating the same database at once. Within one process
// SQLite coordinates connections to one file in memory; between processes
// only the file locks do, and that is where the WAL switch collided. The
// children block on stdin until all are started, then open together.
func TestConcurrentOpenByProcesses(t *testing.T) {
	if path := os.Getenv(openChildEnv); path != "" {
		io.Copy(io.Discard, os.Stdin)
		s, err := Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if _, err := s.CreateRun(context.Background(), newRun()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		s.Close()
		return
	}
	const procs = 4
	path := filepath.Join(t.TempDir(), "r.db")
	var cmds []*exec.Cmd
	var gates []io.Closer
	var outs []*bytes.Buffer
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentOpenByProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), openChildEnv+"="+path)
		gate, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, gates, outs = append(cmds, cmd), append(gates, gate), append(outs, &out)
	}
	for _, g := range gates {
		g.Close()
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	if t.Failed() {
		return
	}
	requireMigratedOnce(t, path)
	runs, err := open(t, path).ListRuns(context.Background())
	if err != nil || len(runs) != procs {
		t.Fatalf("%d runs stored (%v), want one per process, %d", len(runs), err, procs)
	}
}

func TestAbortRunOnlyChangesARunningRun(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	running, ended := createRun(t, s), createRun(t, s)
	owner := procfs.Process{PID: 99, StartTime: 7}
	if err := s.SetRunOwner(ctx, running, owner); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, ended, StatusComplete, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunningRuns(ctx)
	if err != nil || len(runs) != 1 || runs[0].ID != running || runs[0].Owner != owner {
		t.Fatalf("running runs = %+v, %v; want run %d owned by %+v", runs, err, running, owner)
	}
	for id, want := range map[int64]bool{running: true, ended: false} {
		changed, err := s.AbortRun(ctx, id, "its vfleet died", time.Now())
		if err != nil || changed != want {
			t.Errorf("abort run %d: changed %v, %v; want %v", id, changed, err, want)
		}
	}
	if r, _ := s.GetRun(ctx, running); r.Status != StatusAborted || r.StatusReason != "its vfleet died" || r.Finished.IsZero() {
		t.Errorf("aborted run reads back as %q (%q), finished %v", r.Status, r.StatusReason, r.Finished)
	}
	if r, _ := s.GetRun(ctx, ended); r.Status != StatusComplete {
		t.Errorf("a finished run was changed to %q", r.Status)
	}
}

func TestNonRegularPathRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{os.DevNull, dir, fifo} {
		for name, open := range map[string]func(string) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
			if _, err := open(path); !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s(%s): %v, want ErrNotRegular", name, path, err)
			}
		}
		if _, err := os.Stat(path + "-journal"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s-journal was created", path)
		}
	}
}

// smallTmpfs is a 4 MiB file system of the test's own, which a test can
// fill or remount read-only.
func smallTmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestReadOnlyDatabase mounts a file system read-only under the database,
// which refuses root too, as a user's read-only mount would.
func TestReadOnlyDatabase(t *testing.T) {
	testutil.RequiresRoot(t)
	dir := smallTmpfs(t)
	path := filepath.Join(dir, "r.db")
	s := open(t, path)
	id := createRun(t, s)
	s.Close()
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "read-only file system") {
		t.Errorf("Open on a read-only file system: %v, want ErrReadOnly saying why", err)
	}
	if _, err := Open(filepath.Join(dir, "new.db")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Open of a new database on a read-only file system: %v, want ErrReadOnly", err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer ro.Close()
	runs, err := ro.ListRuns(context.Background())
	if err != nil || len(runs) != 1 || runs[0].ID != id {
		t.Fatalf("runs of a read-only database: %+v, %v", runs, err)
	}
	if _, err := ro.CreateRun(context.Background(), newRun()); err == nil {
		t.Error("a read-only store accepted a write")
	}
}

func TestOpenReadOnlyUpgradesAWritableOldDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	s, id := oldDatabase(t, path, 2)
	s.Close()
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly of a writable version-2 database: %v", err)
	}
	defer ro.Close()
	if r, err := ro.GetRun(context.Background(), id); err != nil || r.StatusReason != "" || r.Owner.PID != 0 {
		t.Fatalf("run of an upgraded database: %+v, %v", r, err)
	}
}

// On a full file system SQLite cannot make the index of its write-ahead
// log, and says "disk I/O error": the store says the disk is full.
func TestFullDiskIsSaid(t *testing.T) {
	testutil.RequiresRoot(t)
	dir := smallTmpfs(t)
	path := filepath.Join(dir, "r.db")
	s := open(t, path)
	createRun(t, s)
	s.Close()
	fillDisk(t, dir)
	if _, err := OpenReadOnly(path); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "no space left for the results database on "+dir) {
		t.Errorf("OpenReadOnly on a full disk: %v, want %v", err, ErrDiskFull)
	}
	if _, err := Open(path); !errors.Is(err, ErrDiskFull) {
		t.Errorf("Open on a full disk: %v, want %v", err, ErrDiskFull)
	}
}

// fillDisk fills the file system of dir.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<16)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// A run stored before steps' host load was read has none, and says so by
// having none; a database of version 8 gains the table and takes loads.
func TestVersion8RunHasNoHostLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	old, id := oldDatabase(t, path, 8)
	old.Close()
	s := open(t, path)
	if got, err := s.StepLoads(ctx, id); err != nil || len(got) != 0 {
		t.Fatalf("run of a version 8 database: loads %+v, %v; want none", got, err)
	}
	l := StepLoad{Guest: "ctr-1", WorkloadID: "cpu", Repetition: 2, StartedNS: 5, WallNS: 1e9, CPUs: 2, TotalTicks: 200, TaskTicks: 150, StealTicks: 3, OwnNS: 9e8}
	if err := s.AddStepLoad(ctx, id, l); err != nil {
		t.Fatal(err)
	}
	if got, err := s.StepLoads(ctx, id); err != nil || len(got) != 1 || got[0] != l {
		t.Fatalf("loads %+v, %v; want [%+v]", got, err, l)
	}
}
