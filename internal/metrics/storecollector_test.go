package metrics

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

func storeWithRuns(t *testing.T) (*store.Store, int64) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var last int64
	for i, status := range []string{store.StatusComplete, store.StatusIncomplete} {
		id, err := st.CreateRun(ctx, &store.Run{ScenarioName: "demo", ScenarioText: []byte("name: demo\n"), Started: at.Add(time.Duration(i) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var samples []store.Sample
		for rep, v := range []float64{100, 110} {
			samples = append(samples, store.Sample{RunID: id, Guest: "base", Group: "base", Kind: "host", WorkloadID: "cpu", Workload: "sysbench-cpu",
				Params: workload.Params{"threads": "1"}, Repetition: rep, Metric: "events_per_second", Unit: "1/s", Value: v + float64(i), At: at})
		}
		if err := st.AddSamples(ctx, id, samples); err != nil {
			t.Fatal(err)
		}
		if err := st.AddFailure(ctx, store.Failure{RunID: id, Guest: "c-0", Group: "runc", WorkloadID: "cpu", Error: "exit status 1", At: at}); err != nil {
			t.Fatal(err)
		}
		finished := time.Time{}
		if status == store.StatusComplete {
			finished = at.Add(30 * time.Minute)
		}
		if err := st.FinishRun(ctx, id, status, "", finished); err != nil {
			t.Fatal(err)
		}
		last = id
	}
	return st, last
}

func TestStoreExpositionGolden(t *testing.T) {
	st, _ := storeWithRuns(t)
	golden(t, "store.golden", exposition(t, NewStoreCollector(st, 0)))
}

func TestStoreCollectorSeesNewSamplesOfTheLatestRun(t *testing.T) {
	st, last := storeWithRuns(t)
	c := NewStoreCollector(st, 0)
	_ = exposition(t, c) // fills the cache
	err := st.AddSamples(context.Background(), last, []store.Sample{{RunID: last, Guest: "base", Group: "base", WorkloadID: "cpu",
		Params: workload.Params{"threads": "1"}, Repetition: 2, Metric: "events_per_second", Unit: "1/s", Value: 42, At: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP vfleet_sample_value Latest measured value of one metric of one workload in one guest, in the unit its label names; each repetition overwrites it.
# TYPE vfleet_sample_value gauge
vfleet_sample_value{group="base",guest="base",metric="events_per_second",param_threads="1",run="2",unit="1/s",workload="cpu"} 42
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vfleet_sample_value"); err != nil {
		t.Fatal(err)
	}
}

type brokenStore struct{ Source }

func (brokenStore) ListRuns(context.Context) ([]store.RunSummary, error) {
	return nil, errors.New("database is locked")
}

func TestUnreadableStoreFailsTheScrapeWithTheReason(t *testing.T) {
	err := testutil.CollectAndCompare(NewStoreCollector(brokenStore{}, 0), strings.NewReader(""))
	if err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("got %v, want the store's error", err)
	}
}
