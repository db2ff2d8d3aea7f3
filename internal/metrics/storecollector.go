package metrics

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vfleet/vfleet/internal/store"
)

// MaxStoreRuns bounds how many of the newest stored runs get series of
// their own, so a store that grows for years keeps a bounded scrape.
const MaxStoreRuns = 100

var (
	descStoreRuns = prometheus.NewDesc("vfleet_store_runs",
		"Runs in the results store, by status.", []string{"status"}, nil)
	descStoreUp = prometheus.NewDesc("vfleet_store_up",
		"1 when the last scrape could read the results store, else 0.", nil, nil)
	descRunEnd = prometheus.NewDesc("vfleet_run_end_time_seconds",
		"When the run finished, in seconds since the Unix epoch; absent while it runs or when it was interrupted.", runLabels, nil)
)

// Source is what a StoreCollector reads; *store.Store implements it.
type Source interface {
	ListRuns(ctx context.Context) ([]store.RunSummary, error)
	Samples(ctx context.Context, runID int64) ([]store.Sample, error)
}

// StoreCollector reports the contents of a results store at each scrape:
// how many runs it has, the newest runs' sample and failure counts, and
// the latest value of every dimension set of the newest run.
type StoreCollector struct {
	src     Source
	timeout time.Duration

	// The newest run's values are kept between scrapes and read again only
	// when its sample count changed: a finished run's samples never change
	// and reading them (histograms included) is the costly part.
	mu           sync.Mutex
	cachedRun    int64
	cachedCount  int
	cachedValues *valueSet
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// NewStoreCollector reads src, each scrape bounded by timeout (10 s when 0).
func NewStoreCollector(src Source, timeout time.Duration) *StoreCollector {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &StoreCollector{src: src, timeout: timeout}
}

// Describe sends nothing (an unchecked collector), see RunCollector.Describe.
func (c *StoreCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	runs, err := c.src.ListRuns(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, 0)
		ch <- prometheus.NewInvalidMetric(descStoreUp, fmt.Errorf("read results store: %w", err))
		return
	}
	byStatus := map[string]int{}
	for _, s := range store.Statuses {
		byStatus[s] = 0
	}
	for _, r := range runs {
		byStatus[r.Status]++
	}
	for status, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(descStoreRuns, prometheus.GaugeValue, float64(n), status)
	}
	newest := runs
	if len(newest) > MaxStoreRuns {
		newest = newest[len(newest)-MaxStoreRuns:]
	}
	for _, r := range newest {
		for _, m := range runMetrics(r.ID, r.ScenarioName, "", "", r.Status) {
			ch <- m
		}
		l := []string{strconv.FormatInt(r.ID, 10), r.ScenarioName}
		ch <- prometheus.MustNewConstMetric(descRunSamples, prometheus.CounterValue, float64(r.Samples), l...)
		ch <- prometheus.MustNewConstMetric(descRunFailures, prometheus.CounterValue, float64(r.Failures), l...)
		ch <- prometheus.MustNewConstMetric(descRunStart, prometheus.GaugeValue, unixSeconds(r.Started), l...)
		if !r.Finished.IsZero() {
			ch <- prometheus.MustNewConstMetric(descRunEnd, prometheus.GaugeValue, unixSeconds(r.Finished), l...)
		}
	}
	up := 1.0
	if len(runs) > 0 {
		last := runs[len(runs)-1]
		values, err := c.latestValues(ctx, last)
		if err != nil {
			up = 0
			ch <- prometheus.NewInvalidMetric(descStoreUp, fmt.Errorf("read samples of run %d: %w", last.ID, err))
		} else {
			for _, m := range values {
				ch <- m
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up)
}

func (c *StoreCollector) latestValues(ctx context.Context, r store.RunSummary) ([]prometheus.Metric, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cachedValues == nil || c.cachedRun != r.ID || c.cachedCount != r.Samples {
		samples, err := c.src.Samples(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		vs := newValueSet()
		vs.add(samples)
		c.cachedRun, c.cachedCount, c.cachedValues = r.ID, r.Samples, vs
	}
	return c.cachedValues.metrics(), nil
}
