// Package tracing turns a run into an OpenTelemetry trace: a run span with
// a child span per guest start, per step and for the teardown, sent over
// OTLP/HTTP to a collector.
//
// Tracing is off unless an endpoint is given (Options.Endpoint, or the
// standard OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variables); a disabled Tracer is never handed to the runner, so it costs
// nothing. Spans are batched in the background.
//
// Lifecycle: New, use the Tracer as the runner's Observer, then Shutdown
// with a fresh bounded context, also after an interrupted run: it ends the
// spans still open and flushes everything to the collector.
package tracing
