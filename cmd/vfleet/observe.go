package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/vfleet/vfleet/internal/metrics"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/tracing"
	"github.com/vfleet/vfleet/internal/version"
)

// observeFlags are the flags of `vfleet run` that make a run observable
// from outside: Prometheus metrics while it runs, and its trace.
type observeFlags struct {
	metricsAddr  string
	otlpEndpoint string
}

func (o *observeFlags) register(fs *pflag.FlagSet) {
	fs.Var(&checkedString{p: &o.metricsAddr, check: func(s string) error { _, err := metrics.ListenAddr(s); return err }}, "metrics-addr",
		"serve Prometheus metrics at http://ADDR/metrics while the run lasts (HOST:PORT; :PORT or PORT bind 127.0.0.1; default off)")
	fs.Var(&checkedString{p: &o.otlpEndpoint, check: tracing.CheckEndpoint}, "otlp-endpoint",
		"send the run's trace to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (default: env OTEL_EXPORTER_OTLP_ENDPOINT, else off)")
}

// checkedString is a string flag checked as it is parsed, so a bad value is
// a usage error before the run builds or starts anything.
type checkedString struct {
	p     *string
	check func(string) error
}

func (c *checkedString) String() string {
	if c.p == nil {
		return ""
	}
	return *c.p
}

func (c *checkedString) Set(s string) error {
	if err := c.check(s); err != nil {
		return err
	}
	*c.p = s
	return nil
}

func (c *checkedString) Type() string { return "string" }

// observeTimeout bounds flushing traces and stopping the metrics server at
// exit, so an unreachable collector cannot hold vfleet after Ctrl-C.
const observeTimeout = 5 * time.Second

// start starts what the flags ask for. It returns the runner's observer
// (nil when nothing is asked, so an unobserved run costs nothing) and stop,
// which flushes the trace and stops the server with a fresh bounded
// context: it must run even when the run was interrupted.
func (o *observeFlags) start(ctx context.Context, logf func(string, ...any)) (runner.Observer, func(), error) {
	var obs fanOut
	var stops []func(context.Context) error
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observeTimeout)
		defer cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			if err := stops[i](sctx); err != nil {
				fmt.Fprintf(os.Stderr, "vfleet: %v\n", err)
			}
		}
	}
	tr, err := tracing.New(ctx, tracing.Options{Endpoint: o.otlpEndpoint, ServiceVersion: version.String()})
	if err != nil {
		return nil, nil, err
	}
	if tr.Enabled() {
		// The SDK reports failed exports through a global handler that
		// would write over the progress display.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logf("trace export: %v", err) }))
		obs = append(obs, tr)
		stops = append(stops, tr.Shutdown)
	}
	if o.metricsAddr != "" {
		c := metrics.NewRunCollector(metrics.Options{})
		reg, err := metrics.NewRegistry(c)
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv, err := metrics.Listen(o.metricsAddr, reg)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		if w := metricsExposure(srv.Addr()); w != "" {
			logf("warning: %s", w)
		}
		logf("metrics at http://%s/metrics", srv.Addr())
		obs = append(obs, c)
		stops = append(stops, srv.Close)
	}
	switch len(obs) {
	case 0:
		return nil, stop, nil
	case 1:
		return obs[0], stop, nil
	}
	return obs, stop, nil
}

// metricsExposure warns, or returns "", about a metrics server listening
// at addr: the endpoint has no authentication, and the scenario, guest and
// host names in its labels are nobody else's business unless the user
// opened it on purpose. Callers pass the bound address, so that a host
// name is judged by the address it resolved to.
func metricsExposure(addr string) string {
	// An address these refuse cannot be listened on either.
	full, err := metrics.ListenAddr(addr)
	if err != nil {
		return ""
	}
	host, _, err := net.SplitHostPort(full)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return ""
	}
	return fmt.Sprintf("metrics at %s are exposed beyond this host, without authentication, to anyone who can reach it; "+
		"to keep them on this host, listen on 127.0.0.1:PORT", full)
}

// fanOut passes every event to each observer in turn.
type fanOut []runner.Observer

func (f fanOut) RunStarted(ev runner.RunEvent) {
	for _, o := range f {
		o.RunStarted(ev)
	}
}

func (f fanOut) GuestStarting(ev runner.GuestEvent) func(runner.GuestEvent, error) {
	dones := make([]func(runner.GuestEvent, error), len(f))
	for i, o := range f {
		dones[i] = o.GuestStarting(ev)
	}
	return func(ev runner.GuestEvent, err error) {
		for _, d := range dones {
			d(ev, err)
		}
	}
}

func (f fanOut) StepStarted(ev runner.StepEvent) func(error) {
	return f.each(func(o runner.Observer) func(error) { return o.StepStarted(ev) })
}

func (f fanOut) SamplesStored(runID int64, samples []store.Sample) {
	for _, o := range f {
		o.SamplesStored(runID, samples)
	}
}

func (f fanOut) TeardownStarted(runID int64) func(error) {
	return f.each(func(o runner.Observer) func(error) { return o.TeardownStarted(runID) })
}

func (f fanOut) GuestStopped(ev runner.GuestEvent, err error) {
	for _, o := range f {
		o.GuestStopped(ev, err)
	}
}

func (f fanOut) RunFinished(runID int64, status string) {
	for _, o := range f {
		o.RunFinished(runID, status)
	}
}

func (f fanOut) each(start func(runner.Observer) func(error)) func(error) {
	dones := make([]func(error), len(f))
	for i, o := range f {
		dones[i] = start(o)
	}
	return func(err error) {
		for _, d := range dones {
			d(err)
		}
	}
}
