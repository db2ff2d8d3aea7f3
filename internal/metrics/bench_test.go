package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// BenchmarkScrape100Guests measures one whole scrape (collect, read every
// guest's cgroup files, encode the text format) of a run with 100 live
// container guests, each with 3 workloads × 2 metrics of latest values.
func BenchmarkScrape100Guests(b *testing.B) {
	root := b.TempDir()
	cpu, mem := recorded(b, "cgroup-v1/cpuacct.usage"), recorded(b, "cgroup-v1/memory.usage_in_bytes")
	c := NewRunCollector(Options{Root: root})
	c.RunStarted(runner.RunEvent{ID: 1, Key: "r1-abcdef", Scenario: "bench", Steps: 600, Guests: 100})
	for i := range 100 {
		name := fmt.Sprintf("c-%d", i)
		cg := "/vfleet/r1-abcdef/" + name
		for _, f := range []struct {
			controller, file string
			b                []byte
		}{{"cpuacct", "cpuacct.usage", cpu}, {"memory", "memory.usage_in_bytes", mem}} {
			dir := filepath.Join(root, "sys/fs/cgroup", f.controller, cg)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f.file), f.b, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		ev := runner.GuestEvent{RunID: 1, Name: name, Group: "runc", Kind: "container", Runtime: "runc", BootTime: time.Second, Cgroup: cg}
		c.GuestStarting(ev)(ev, nil)
		var samples []store.Sample
		for _, w := range []string{"cpu", "mem", "disk"} {
			for _, m := range []string{"throughput", "latency_p99"} {
				samples = append(samples, store.Sample{RunID: 1, Guest: name, Group: "runc", WorkloadID: w, Metric: m, Unit: "1/s",
					Params: workload.Params{"threads": "1"}, Value: float64(i)})
			}
		}
		c.SamplesStored(1, samples)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("scrape: %d %s", w.Code, w.Body)
		}
	}
}
