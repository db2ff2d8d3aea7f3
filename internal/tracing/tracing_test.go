package tracing

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// receiver is an OTLP/HTTP trace receiver on loopback: it decodes each
// export request with the protocol's own types and keeps the spans.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	paths    []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an application/x-protobuf body", http.StatusUnsupportedMediaType)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	for _, rs := range msg.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *receiver) received() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

func id(b []byte) string { return hex.EncodeToString(b) }

// fake's guests answer with a recorded sysbench output and describe
// themselves fully, so every span attribute has a value.
var fake = guesttest.NewFake("fake", func(s guest.Spec) guest.Info {
	return guest.Info{Kind: "fake", Runtime: "r1", ScratchDir: "/scratch", PIDs: []int{4242}, Cgroup: "/vfleet/x/" + s.Name, BootTime: 3 * time.Millisecond}
})

func init() { guest.Register(fake) }

const scenarioText = `name: traced
repetitions: 2
warmup: 1
duration: 1s
guests:
  - {name: base, kind: fake}
  - {name: other, kind: fake, count: 2}
baseline: base
workloads:
  - workload: cpu
`

type quiet struct{}

func (quiet) Phase(string, int)   {}
func (quiet) Item(string, error)  {}
func (quiet) Logf(string, ...any) {}

// runTraced runs the scenario with the fake kind under tr.
func runTraced(t *testing.T, ctx context.Context, tr *Tracer, failExec map[string]bool, onExec func()) (int64, error) {
	t.Helper()
	out, err := os.ReadFile("../workload/testdata/sysbench-cpu.stdout")
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset(out)
	for name := range failExec {
		fake.FailExec(name)
	}
	if onExec != nil {
		fake.OnExec(func(string) { onExec() })
	}
	spec, err := scenario.Parse("t.yaml", []byte(scenarioText), scenario.Options{KnownKinds: []string{"fake"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return runner.Run(ctx, spec.Expand(), runner.Options{Store: st, StateRoot: t.TempDir(), Progress: quiet{}, Observer: tr})
}

func shutdown(t *testing.T, tr *Tracer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRunBecomesOneTraceOfRunGuestStepAndTeardownSpans(t *testing.T) {
	rcv := newReceiver(t)
	tr, err := New(context.Background(), Options{Endpoint: rcv.srv.URL, ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() {
		t.Fatal("tracer with an endpoint is disabled")
	}
	if _, err := runTraced(t, context.Background(), tr, map[string]bool{"other-1": true}, nil); err != nil {
		t.Fatal(err)
	}
	shutdown(t, tr)

	spans := rcv.received()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.GetName()] = append(byName[s.GetName()], s)
	}
	counts := map[string]int{}
	for n, ss := range byName {
		counts[n] = len(ss)
	}
	want := map[string]int{SpanRun: 1, SpanGuestStart: 3, SpanStep: 9, SpanTeardown: 1}
	if len(counts) != len(want) {
		t.Fatalf("span names %v, want %v", counts, want)
	}
	for n, c := range want {
		if counts[n] != c {
			t.Fatalf("span names %v, want %v", counts, want)
		}
	}
	root := byName[SpanRun][0]
	if len(root.GetParentSpanId()) != 0 {
		t.Errorf("run span has a parent %s", id(root.GetParentSpanId()))
	}
	if attr(root, "vfleet.scenario").GetStringValue() != "traced" || attr(root, "vfleet.run.status").GetStringValue() != store.StatusCompleteWithFailures ||
		attr(root, "vfleet.run.steps").GetIntValue() != 9 {
		t.Errorf("run span attributes %v", root.GetAttributes())
	}
	for _, s := range spans {
		if id(s.GetTraceId()) != id(root.GetTraceId()) {
			t.Errorf("%s span in trace %s, not the run's %s", s.GetName(), id(s.GetTraceId()), id(root.GetTraceId()))
		}
		if s != root && id(s.GetParentSpanId()) != id(root.GetSpanId()) {
			t.Errorf("%s span's parent is %s, not the run span %s", s.GetName(), id(s.GetParentSpanId()), id(root.GetSpanId()))
		}
		if s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() || s.GetStartTimeUnixNano() < root.GetStartTimeUnixNano() ||
			s.GetEndTimeUnixNano() > root.GetEndTimeUnixNano() {
			t.Errorf("%s span [%d, %d] is not inside the run span [%d, %d]", s.GetName(),
				s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano(), root.GetStartTimeUnixNano(), root.GetEndTimeUnixNano())
		}
	}
	var guests []string
	for _, s := range byName[SpanGuestStart] {
		guests = append(guests, attr(s, "vfleet.guest").GetStringValue())
		if attr(s, "vfleet.runtime").GetStringValue() != "r1" || attr(s, "vfleet.guest.cgroup").GetStringValue() == "" ||
			attr(s, "vfleet.guest.boot_seconds").GetDoubleValue() != 0.003 {
			t.Errorf("guest.start attributes %v", s.GetAttributes())
		}
	}
	sort.Strings(guests)
	if strings.Join(guests, " ") != "base other-0 other-1" {
		t.Errorf("guest.start spans for %v", guests)
	}
	var failed, warmups, withSamples int
	for _, s := range byName[SpanStep] {
		if attr(s, "vfleet.workload").GetStringValue() != "cpu" || attr(s, "vfleet.kind").GetStringValue() != "fake" ||
			attr(s, "vfleet.group") == nil || attr(s, "vfleet.repetition") == nil || attr(s, "vfleet.param.threads") == nil {
			t.Errorf("step attributes %v", s.GetAttributes())
		}
		if attr(s, "vfleet.warmup").GetBoolValue() {
			warmups++
		}
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			failed++
			if attr(s, "vfleet.guest").GetStringValue() != "other-1" || !strings.Contains(s.GetStatus().GetMessage(), "out of luck") {
				t.Errorf("failed step %v: %s", s.GetAttributes(), s.GetStatus().GetMessage())
			}
		}
		for _, ev := range s.GetEvents() {
			if ev.GetName() == "samples stored" {
				withSamples++
			}
		}
	}
	if failed != 3 || warmups != 3 || withSamples != 4 {
		t.Errorf("%d failed steps, %d warm-ups, %d with samples; want 3, 3, 4", failed, warmups, withSamples)
	}
	stopped := 0
	for _, ev := range byName[SpanTeardown][0].GetEvents() {
		if ev.GetName() == "guest stopped" {
			stopped++
		}
	}
	if stopped != 3 {
		t.Errorf("teardown has %d guest stopped events, want 3", stopped)
	}
	for _, p := range rcv.paths {
		if p != "/v1/traces" {
			t.Errorf("export to %s, want /v1/traces", p)
		}
	}
	if len(rcv.services) == 0 || rcv.services[0] != "vfleet" {
		t.Errorf("service names %v", rcv.services)
	}
}

func TestInterruptedRunIsFlushedAtShutdown(t *testing.T) {
	rcv := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT did not enable tracing")
	}
	// What Ctrl-C does: the run's context is cancelled in the middle of a
	// step.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	_, err = runTraced(t, ctx, tr, nil, func() {
		if calls++; calls == 4 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run error %v, want an interruption", err)
	}
	if n := len(rcv.received()); n > 0 {
		t.Logf("%d spans exported before shutdown", n)
	}
	shutdown(t, tr)
	var root, teardown, interrupted int
	for _, s := range rcv.received() {
		switch s.GetName() {
		case SpanRun:
			root++
			if attr(s, "vfleet.run.status").GetStringValue() != store.StatusIncomplete || s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("interrupted run span: %v %v", s.GetAttributes(), s.GetStatus())
			}
		case SpanTeardown:
			teardown++
		case SpanStep:
			if attr(s, "vfleet.interrupted").GetBoolValue() {
				interrupted++
			}
		}
	}
	if root != 1 || teardown != 1 || interrupted != 1 {
		t.Errorf("%d run, %d teardown, %d interrupted step spans; want 1 each", root, teardown, interrupted)
	}
}

func TestShutdownEndsSpansLeftOpen(t *testing.T) {
	rcv := newReceiver(t)
	tr, err := New(context.Background(), Options{Endpoint: strings.TrimPrefix(rcv.srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	tr.RunStarted(runner.RunEvent{ID: 1, Scenario: "s"})
	_ = tr.StepStarted(runner.StepEvent{RunID: 1, Guest: "g"})
	shutdown(t, tr)
	shutdown(t, tr) // idempotent
	spans := rcv.received()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the run and its step", len(spans))
	}
	for _, s := range spans {
		if s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s left open ended without an error status", s.GetName())
		}
	}
}

func TestTracingIsOffWithoutAnEndpoint(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(v, "")
	}
	tr, err := New(context.Background(), Options{})
	if err != nil || tr.Enabled() {
		t.Fatalf("New without endpoint: enabled %v, %v", tr.Enabled(), err)
	}
	// A disabled tracer still is a harmless observer.
	tr.RunStarted(runner.RunEvent{ID: 1})
	tr.StepStarted(runner.StepEvent{RunID: 1})(nil)
	tr.RunFinished(1, store.StatusComplete)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tr, _ := New(context.Background(), Options{}); tr.Enabled() {
		t.Fatal("OTEL_SDK_DISABLED=true did not disable tracing")
	}
}

func TestGRPCProtocolIsRefusedByName(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, err := New(context.Background(), Options{Endpoint: "127.0.0.1:4317"})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("got %v, want ErrProtocol naming http/protobuf", err)
	}
}

func TestExporterTarget(t *testing.T) {
	for in, want := range map[string][3]string{
		"http://127.0.0.1:4318":          {"127.0.0.1:4318", "/v1/traces", "http"},
		"127.0.0.1:4318":                 {"127.0.0.1:4318", "/v1/traces", "http"},
		"https://otel.example:443/otlp/": {"otel.example:443", "/otlp/v1/traces", "https"},
		"http://[::1]:4318":              {"[::1]:4318", "/v1/traces", "http"},
	} {
		host, path, insecure, err := exporterTarget(in)
		scheme := "https"
		if insecure {
			scheme = "http"
		}
		if err != nil || host != want[0] || path != want[1] || scheme != want[2] {
			t.Errorf("exporterTarget(%q) = %q %q %v %v; want %v", in, host, path, insecure, err, want)
		}
	}
	for _, bad := range []string{"grpc://127.0.0.1:4317", "http://", "http://:4318", "http://h:0", "http://h:99999", "http://h:4318/?x=1", "http://u:p@h:4318", "%zz"} {
		if _, _, _, err := exporterTarget(bad); err == nil {
			t.Errorf("exporterTarget(%q) accepted", bad)
		}
	}
}

func TestUnreachableCollectorIsReportedNotFatal(t *testing.T) {
	// A port nothing listens on: take one, then free it.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	var mu sync.Mutex
	var reported []error
	previous := otel.GetErrorHandler()
	t.Cleanup(func() { otel.SetErrorHandler(previous) })
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	tr, err := New(context.Background(), Options{Endpoint: addr})
	if err != nil {
		t.Fatal(err)
	}
	tr.RunStarted(runner.RunEvent{ID: 1})
	tr.RunFinished(1, store.StatusComplete)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx) // the export's failure goes to the handler, not here
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || !strings.Contains(reported[0].Error(), "connect") {
		t.Fatalf("errors reported %v, want the refused connection", reported)
	}
}
