package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the tracer provider of `api serve` (ADR 0012). It exists only
// when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise provider is nil, and the
// HTTP handler, the pool and the outbox dispatcher are built with no
// instrumentation at all.
type tracing struct {
	sdk *sdktrace.TracerProvider
}

// newTracing builds the tracer provider: spans go out in batches (the SDK's
// batch span processor: a bounded queue that drops spans rather than block a
// request when the collector falls behind) with OTLP over HTTP, under
// service.name OTEL_SERVICE_NAME. extra span processors (tests record spans
// with one) see every span too.
//
// The switch and the service name are this service's settings. The SDK
// itself reads the other standard variables (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION and the certificate ones, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*), so that a collector set up as
// OpenTelemetry documents works as it is.
func newTracing(ctx context.Context, c config, log *slog.Logger, extra ...sdktrace.SpanProcessor) (*tracing, error) {
	if c.OTLPEndpoint == "" {
		return &tracing{}, nil
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL(c.OTLPEndpoint)))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(c.ServiceName))),
	}
	for _, p := range extra {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	// Export failures (a collector that is down) are reported through
	// OpenTelemetry's one process-wide handler: into the service's log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", "err", err)
	}))
	log.Info("tracing on", "endpoint", redactEndpoint(c.OTLPEndpoint), "service_name", c.ServiceName)
	return &tracing{sdk: sdktrace.NewTracerProvider(opts...)}, nil
}

// provider is the tracer provider to build with, nil when tracing is off.
func (t *tracing) provider() trace.TracerProvider {
	if t.sdk == nil {
		return nil
	}
	return t.sdk
}

// shutdown exports the spans still queued and stops the exporter. serve
// calls it once the HTTP server and the workers have stopped, so that their
// last spans are in, and before the pool closes. Later calls do nothing.
func (t *tracing) shutdown(ctx context.Context, log *slog.Logger) {
	if t.sdk == nil {
		return
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not all exported at shutdown", "err", err)
	}
}

// tracesURL is where OTLP over HTTP sends spans: the base endpoint's path
// followed by /v1/traces, as the specification says for
// OTEL_EXPORTER_OTLP_ENDPOINT.
func tracesURL(endpoint string) string {
	u, _ := url.Parse(endpoint) // checked by loadConfig
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String()
}

// redactEndpoint is the endpoint fit for the log: no credentials, no query.
func redactEndpoint(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + u.Path
}
