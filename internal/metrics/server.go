package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is where `vfleet serve` listens unless told otherwise; 9477
// is free in Prometheus's list of default exporter ports.
const DefaultAddr = "127.0.0.1:9477"

// ListenAddr completes a --metrics-addr value: an address without a host
// (":9477") or a bare port ("9477") binds to loopback only, so nothing is
// exposed to the network unless a host is named explicitly.
func ListenAddr(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("metrics address is empty (want HOST:PORT, :PORT or PORT)")
	}
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want HOST:PORT, :PORT or PORT", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return "", fmt.Errorf("metrics address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// NewRegistry returns a registry with the given collectors and vfleet's own
// process and Go runtime metrics.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		prometheus.NewGoCollector(),
	}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return reg, nil
}

// Server serves /metrics of one registry over HTTP.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	once sync.Once
	err  error
}

// Listen starts serving g's metrics at addr (completed by ListenAddr) and
// returns once the socket is bound, so a port conflict is reported at once.
func Listen(addr string, g prometheus.Gatherer) (*Server, error) {
	addr, err := ListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: %w", err)
	}
	mux := http.NewServeMux()
	// ContinueOnError: a guest whose cgroup vanished mid-scrape must not
	// cost the whole scrape.
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "vfleet metrics: /metrics")
	})
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln}
	// Serve returns http.ErrServerClosed after Close; nothing to report.
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on (with the port chosen when 0
// was asked for).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, letting a scrape in flight finish within ctx.
// It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = s.srv.Close()
		}
		if err != nil {
			s.err = fmt.Errorf("stop metrics server: %w", err)
		}
	})
	return s.err
}
