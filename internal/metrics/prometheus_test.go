package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRealPrometheusScrapesTheEndpoint runs Debian's Prometheus server on
// loopback against a metrics endpoint and reads the values back through
// its query API: the proof that what we expose is what Prometheus ingests.
func TestRealPrometheusScrapesTheEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		// scripts/deps.sh --test installs it, so its absence is a broken
		// setup, not a host that cannot run the test.
		t.Fatalf("prometheus not installed (Debian package prometheus; scripts/deps.sh --test installs it): %v", err)
	}
	c := NewRunCollector(Options{Root: fakeRoot(t), Now: fixedClock})
	feed(c)
	reg, err := NewRegistry(c)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })

	dir, err := os.MkdirTemp("", "vfleet-prometheus-")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vfleet
    static_configs:
      - targets: [%q]
`, srv.Addr())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	web := freeLoopbackAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web,
		"--log.level=warn")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove Prometheus's data: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("Prometheus's data directory %s is left behind", dir)
		}
	}()

	want := map[string]float64{
		`vfleet_run_steps_done_total{run="7",scenario="demo"}`:                       5,
		`vfleet_guest_cpu_seconds_total{guest="c-0"}`:                                0.280115349,
		`vfleet_guest_memory_bytes{guest="c-0"}`:                                     52690944,
		`vfleet_guest_up{guest="vm-0"}`:                                              0,
		`vfleet_sample_value{guest="c-0",workload="cpu",param_threads="1"}`:          990,
		`vfleet_guest_network_transmit_packets_total{guest="base",interface="eth0"}`: 9396,
		`vfleet_run_failures_total{run="7"} / vfleet_run_steps_done_total{run="7"}`:  0.4,
	}
	api := "http://" + web + "/api/v1/query?query="
	got := map[string]float64{}
	for query := range want {
		for {
			v, ok, qerr := queryOne(ctx, api+url.QueryEscape(query))
			if ok {
				got[query] = v
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
			case <-ctx.Done():
				t.Fatalf("no value for %s before the deadline (last error: %v)\nprometheus log:\n%s", query, qerr, logs.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	for q, w := range want {
		if d := got[q] - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", q, got[q], w)
		}
	}
	// Every query of the Grafana dashboard must be valid PromQL.
	for _, expr := range dashboardQueries(t) {
		expr = strings.ReplaceAll(expr, "$run", ".*")
		if _, _, err := queryOne(ctx, api+url.QueryEscape(expr)); err != nil && strings.HasPrefix(err.Error(), "query:") {
			t.Errorf("dashboard query %s: %v", expr, err)
		}
	}
}

func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct{ Targets []struct{ Expr string } }
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// queryOne asks Prometheus for an instant vector and returns its single
// value; ok is false while the series has not been scraped yet.
func queryOne(ctx context.Context, u string) (v float64, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, false, fmt.Errorf("decode query answer: %w", err)
	}
	if r.Status != "success" {
		return 0, false, fmt.Errorf("query: %s", r.Error)
	}
	if len(r.Data.Result) != 1 {
		return 0, false, fmt.Errorf("%d series", len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err = strconv.ParseFloat(s, 64)
	return v, err == nil, err
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
