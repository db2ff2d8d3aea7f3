package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
)

// ScopeName names the instrumentation in every exported span.
const ScopeName = "github.com/vfleet/vfleet"

// Span names. They stay few and fixed; what varies goes into attributes.
const (
	SpanRun        = "run"
	SpanGuestStart = "guest.start"
	SpanStep       = "step"
	SpanTeardown   = "teardown"
)

// Options configure New.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// "http://127.0.0.1:4318" ("/v1/traces" is appended); a bare
	// HOST:PORT means http. Empty leaves it to the standard environment
	// variables, and without them tracing is off.
	Endpoint string
	// ServiceVersion is reported as service.version.
	ServiceVersion string
}

// ErrProtocol says the environment asks for an OTLP transport vfleet does
// not speak.
var ErrProtocol = errors.New("unsupported OTLP protocol")

// Tracer is a runner.Observer that records a run as a trace. It is safe
// for concurrent use.
type Tracer struct {
	tp     *sdktrace.TracerProvider // nil when disabled
	tracer trace.Tracer

	mu   sync.Mutex
	runs map[int64]*runSpans
}

type runSpans struct {
	ctx      context.Context // carries the run span
	span     trace.Span
	step     trace.Span // the step running now, for its samples' event
	teardown trace.Span
}

var _ runner.Observer = (*Tracer)(nil)

// New returns a Tracer exporting to the configured endpoint, or a disabled
// one when none is configured. It does not contact the collector: an
// unreachable one shows up as export errors, never as a failed run.
func New(ctx context.Context, opts Options) (*Tracer, error) {
	t := &Tracer{runs: map[int64]*runSpans{}}
	if !wanted(opts.Endpoint) {
		return t, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(name); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s: %w (vfleet sends traces as http/protobuf)", name, p, ErrProtocol)
		}
	}
	var eopts []otlptracehttp.Option
	if opts.Endpoint != "" {
		host, path, insecure, err := exporterTarget(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		eopts = append(eopts, otlptracehttp.WithEndpoint(host), otlptracehttp.WithURLPath(path))
		if insecure {
			eopts = append(eopts, otlptracehttp.WithInsecure())
		}
	}
	exp, err := otlptracehttp.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "vfleet"),
		attribute.String("service.version", opts.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.tracer = t.tp.Tracer(ScopeName)
	return t, nil
}

// wanted applies the standard switches: an explicit endpoint turns tracing
// on; otherwise the OTLP endpoint variables do, unless the SDK or the
// traces exporter is switched off.
func wanted(endpoint string) bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// CheckEndpoint reports whether Options.Endpoint would be accepted, so a
// command line can refuse a bad one before any work starts.
func CheckEndpoint(endpoint string) error {
	_, _, _, err := exporterTarget(endpoint)
	return err
}

// exporterTarget splits an endpoint into the exporter's host, URL path and
// whether to use plain http, the way the standard base-endpoint variable
// is read: the signal's path is appended to the given one.
func exporterTarget(endpoint string) (host, path string, insecure bool, err error) {
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", false, fmt.Errorf("otlp endpoint %q: %w", endpoint, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", false, fmt.Errorf("otlp endpoint %q: scheme %q, want http or https", endpoint, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", "", false, fmt.Errorf("otlp endpoint %q: no host (want e.g. http://127.0.0.1:4318)", endpoint)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", "", false, fmt.Errorf("otlp endpoint %q: only scheme, host, port and path are allowed", endpoint)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "", "", false, fmt.Errorf("otlp endpoint %q: port %q is not a number from 1 to 65535", endpoint, p)
		}
	}
	return u.Host, strings.TrimSuffix(u.Path, "/") + "/v1/traces", u.Scheme == "http", nil
}

// Enabled says whether spans are exported. A disabled Tracer need not be
// given to the runner at all.
func (t *Tracer) Enabled() bool { return t != nil && t.tp != nil }

// Shutdown ends the spans still open (an interrupted run's) and flushes
// every span to the collector within ctx. It is safe on a disabled or nil
// Tracer and when called twice.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	t.mu.Lock()
	for id, r := range t.runs {
		for _, s := range []trace.Span{r.step, r.teardown} {
			if s != nil {
				s.SetStatus(codes.Error, "not finished when vfleet exited")
				s.End()
			}
		}
		r.span.SetStatus(codes.Error, "not finished when vfleet exited")
		r.span.End()
		delete(t.runs, id)
	}
	t.mu.Unlock()
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// parent returns the context of the run's span; a run never announced
// (which the runner does not do) gets a trace of its own.
func (t *Tracer) parent(runID int64) (context.Context, *runSpans) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.runs[runID]; r != nil {
		return r.ctx, r
	}
	return context.Background(), nil
}

func (t *Tracer) start(runID int64, name string, attrs ...attribute.KeyValue) (trace.Span, *runSpans) {
	ctx, r := t.parent(runID)
	_, span := t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	return span, r
}

func end(span trace.Span, err error) {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			span.SetAttributes(attribute.Bool("vfleet.interrupted", true))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// RunStarted implements runner.Observer: each run is the root of a trace.
func (t *Tracer) RunStarted(ev runner.RunEvent) {
	if !t.Enabled() {
		return
	}
	ctx, span := t.tracer.Start(context.Background(), SpanRun, trace.WithNewRoot(), trace.WithAttributes(
		attribute.Int64("vfleet.run.id", ev.ID),
		attribute.String("vfleet.run.key", ev.Key),
		attribute.String("vfleet.scenario", ev.Scenario),
		attribute.String("vfleet.run.label", ev.Label),
		attribute.Int("vfleet.run.steps", ev.Steps),
		attribute.Int("vfleet.run.guests", ev.Guests)))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs[ev.ID] = &runSpans{ctx: ctx, span: span}
}

func guestAttrs(ev runner.GuestEvent) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("vfleet.guest", ev.Name),
		attribute.String("vfleet.group", ev.Group),
		attribute.String("vfleet.kind", ev.Kind),
		attribute.String("vfleet.runtime", ev.Runtime),
	}
}

// GuestStarting implements runner.Observer.
func (t *Tracer) GuestStarting(ev runner.GuestEvent) func(runner.GuestEvent, error) {
	if !t.Enabled() {
		return func(runner.GuestEvent, error) {}
	}
	span, _ := t.start(ev.RunID, SpanGuestStart, guestAttrs(ev)...)
	return func(ev runner.GuestEvent, err error) {
		if err == nil {
			span.SetAttributes(guestAttrs(ev)...)
			span.SetAttributes(
				attribute.Float64("vfleet.guest.boot_seconds", ev.BootTime.Seconds()),
				attribute.IntSlice("vfleet.guest.pids", ev.PIDs),
				attribute.String("vfleet.guest.cgroup", ev.Cgroup))
		}
		end(span, err)
	}
}

// StepStarted implements runner.Observer.
func (t *Tracer) StepStarted(ev runner.StepEvent) func(error) {
	if !t.Enabled() {
		return func(error) {}
	}
	attrs := []attribute.KeyValue{
		attribute.String("vfleet.guest", ev.Guest),
		attribute.String("vfleet.group", ev.Group),
		attribute.String("vfleet.kind", ev.Kind),
		attribute.String("vfleet.workload", ev.WorkloadID),
		attribute.String("vfleet.workload.tool", ev.Workload),
		attribute.Int("vfleet.repetition", ev.Repetition),
		attribute.Bool("vfleet.warmup", ev.Warmup),
	}
	for k, v := range ev.Params {
		attrs = append(attrs, attribute.String("vfleet.param."+k, v))
	}
	span, r := t.start(ev.RunID, SpanStep, attrs...)
	t.mu.Lock()
	if r != nil {
		r.step = span
	}
	t.mu.Unlock()
	return func(err error) {
		t.mu.Lock()
		if r != nil && r.step == span {
			r.step = nil
		}
		t.mu.Unlock()
		end(span, err)
	}
}

// SamplesStored implements runner.Observer: an event on the step's span.
func (t *Tracer) SamplesStored(runID int64, samples []store.Sample) {
	if !t.Enabled() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[runID]
	if r == nil || r.step == nil {
		return
	}
	metrics := make([]string, 0, len(samples))
	for _, s := range samples {
		metrics = append(metrics, s.Metric)
	}
	r.step.AddEvent("samples stored", trace.WithAttributes(
		attribute.Int("vfleet.samples", len(samples)),
		attribute.StringSlice("vfleet.metrics", metrics)))
}

// TeardownStarted implements runner.Observer.
func (t *Tracer) TeardownStarted(runID int64) func(error) {
	if !t.Enabled() {
		return func(error) {}
	}
	span, r := t.start(runID, SpanTeardown)
	t.mu.Lock()
	if r != nil {
		r.teardown = span
	}
	t.mu.Unlock()
	return func(err error) {
		t.mu.Lock()
		if r != nil {
			r.teardown = nil
		}
		t.mu.Unlock()
		end(span, err)
	}
}

// GuestStopped implements runner.Observer: an event on the teardown span,
// which covers the guests' stops, run in parallel.
func (t *Tracer) GuestStopped(ev runner.GuestEvent, err error) {
	if !t.Enabled() {
		return
	}
	attrs := guestAttrs(ev)
	if err != nil {
		attrs = append(attrs, attribute.String("vfleet.error", err.Error()))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.runs[ev.RunID]; r != nil && r.teardown != nil {
		r.teardown.AddEvent("guest stopped", trace.WithAttributes(attrs...))
	}
}

// RunFinished implements runner.Observer: a run that did not complete ends
// with an error status naming its status.
func (t *Tracer) RunFinished(runID int64, status string) {
	if !t.Enabled() {
		return
	}
	t.mu.Lock()
	r := t.runs[runID]
	delete(t.runs, runID)
	t.mu.Unlock()
	if r == nil {
		return
	}
	r.span.SetAttributes(attribute.String("vfleet.run.status", status))
	if status != store.StatusComplete {
		r.span.SetStatus(codes.Error, "run "+status)
	}
	r.span.End()
}
