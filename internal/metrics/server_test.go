package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"9477":            "127.0.0.1:9477",
		":9477":           "127.0.0.1:9477",
		"0":               "127.0.0.1:0",
		"0.0.0.0:9477":    "0.0.0.0:9477",
		"localhost:9100":  "localhost:9100",
		"[::1]:9477":      "[::1]:9477",
		"127.0.0.1:65535": "127.0.0.1:65535",
	} {
		got, err := ListenAddr(in)
		if err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host", "host:", ":http", ":65536", "1.2.3.4:-1", "a:b:c"} {
		if got, err := ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}

func TestServerServesMetricsAndCloses(t *testing.T) {
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
	if _, err := Listen(srv.Addr(), reg); err == nil {
		t.Error("a second server on the same port started")
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vfleet_run_steps_done_total{run="7",scenario="demo"} 5`, "process_cpu_seconds_total", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatal("the port still accepts connections after Close")
	}
}

func TestRegistryRefusesACollectorTwice(t *testing.T) {
	c := prometheus.NewGoCollector()
	if _, err := NewRegistry(c); err == nil {
		t.Fatal("registering the Go collector twice was accepted")
	}
}
