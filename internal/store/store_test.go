package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
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

func newRun() *Run {
	return &Run{
		ScenarioName: "default", ScenarioSource: "builtin:default", ScenarioText: []byte("name: default\n"),
		ScenarioHash: "abc", Baseline: "host",
		Started: time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC),
		Host:    hostinfo.Fingerprint{Kernel: "6.1.0", CPUModel: "Test CPU", OnlineCPUs: 2, ToolVersions: map[string]string{"fio": "3.33"}},
	}
}

func TestRoundTripEveryField(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "sub", "r.db"))
	in := newRun()
	id, err := s.CreateRun(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	guests := map[string]GuestRecord{"container": {Group: "container", Kind: "container", Runtime: "runc", CPUs: "1", Memory: 1 << 30, BootNS: 42, Details: map[string]string{"a": "b"}}}
	if err := s.SetRunGuests(ctx, id, guests); err != nil {
		t.Fatal(err)
	}
	sample := Sample{RunID: id, Guest: "container", Group: "container", Kind: "container", Runtime: "runc",
		WorkloadID: "fio-randread", Workload: "fio", Params: workload.Params{"rw": "randread"}, Repetition: 2,
		Metric: "read_iops", Unit: "IOPS", Value: 1234.5, Better: workload.HigherIsBetter,
		At: time.Date(2026, 11, 22, 10, 0, 1, 987654321, time.UTC), WallNS: 3e9, CPUNS: 1e9}
	if err := s.AddSamples(ctx, id, []Sample{sample}); err != nil {
		t.Fatal(err)
	}
	fail := Failure{RunID: id, Guest: "host", Group: "host", WorkloadID: "cpu", Repetition: 0, Error: "exit status 1", Stderr: "boom", At: sample.At}
	if err := s.AddFailure(ctx, fail); err != nil {
		t.Fatal(err)
	}
	finished := in.Started.Add(time.Minute)
	if err := s.FinishRun(ctx, id, StatusComplete, finished); err != nil {
		t.Fatal(err)
	}

	got, err := s.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := *in
	want.ID, want.Status, want.Finished, want.Guests = id, StatusComplete, finished, guests
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("run round trip:\n got %+v\nwant %+v", got, want)
	}
	samples, err := s.Samples(ctx, id)
	if err != nil || len(samples) != 1 || !reflect.DeepEqual(samples[0], sample) {
		t.Fatalf("samples = %+v, %v", samples, err)
	}
	fails, err := s.Failures(ctx, id)
	if err != nil || len(fails) != 1 || !reflect.DeepEqual(fails[0], fail) {
		t.Fatalf("failures = %+v, %v", fails, err)
	}
	list, err := s.ListRuns(ctx)
	if err != nil || len(list) != 1 || list[0].Samples != 1 || list[0].Failures != 1 || list[0].Status != StatusComplete {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

func TestInterruptedRunKeepsSamplesAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.CreateRun(ctx, newRun())
	for rep := 0; rep < 3; rep++ {
		if err := s.AddSamples(ctx, id, []Sample{{Guest: "host", Metric: "m", Value: float64(rep), Repetition: rep}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // the process "dies" without FinishRun

	s = open(t, path)
	r, err := s.GetRun(ctx, id)
	if err != nil || r.Status != StatusRunning || !r.Finished.IsZero() {
		t.Fatalf("run after reopen = %+v, %v", r, err)
	}
	samples, _ := s.Samples(ctx, id)
	if len(samples) != 3 || samples[2].Value != 2 {
		t.Fatalf("samples after reopen = %+v", samples)
	}
}

func TestReopenIsIdempotentAndFutureSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	var n int
	s.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
	if n != len(migrations) {
		t.Fatalf("%d migrations recorded, want %d", n, len(migrations))
	}
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestNonDatabaseFileRefusedUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := []byte("my precious notes, not a database\n")
	os.WriteFile(path, content, 0o600)
	if _, err := Open(path); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("err = %v, want ErrNotDatabase", err)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(content) {
		t.Fatal("refused file was modified")
	}
}

func TestResolveRun(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "r.db"))
	if _, err := s.ResolveRun(ctx, "latest"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest on empty store: %v", err)
	}
	s.CreateRun(ctx, newRun())
	id2, _ := s.CreateRun(ctx, newRun())
	for ref, want := range map[string]int64{"latest": id2, "1": 1} {
		got, err := s.ResolveRun(ctx, ref)
		if err != nil || got != want {
			t.Errorf("ResolveRun(%q) = %d, %v; want %d", ref, got, err, want)
		}
	}
	for _, ref := range []string{"99", "x", "-1", ""} {
		if _, err := s.ResolveRun(ctx, ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveRun(%q) err = %v, want ErrNotFound", ref, err)
		}
	}
	if err := s.FinishRun(ctx, 99, StatusComplete, time.Now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun of a missing run: %v", err)
	}
}

func TestConcurrentAddSamples(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "r.db"))
	id, _ := s.CreateRun(ctx, newRun())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if err := s.AddSamples(ctx, id, []Sample{{Metric: "m", Value: 1}, {Metric: "n", Value: 2}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	samples, _ := s.Samples(ctx, id)
	if len(samples) != 160 {
		t.Fatalf("%d samples, want 160", len(samples))
	}
}
