package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// serve runs `api serve`: the server (server.go) until ctx ends, then its
// stop sequence. listening, when set, receives the bound address once the
// server serves (tests listen on :0); tests may pass hooks.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer, listening chan<- string, hooks ...serveHooks) error {
	var h serveHooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	s, err := newServer(ctx, c, newLogger(stdout, c.LogLevel), h)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	if listening != nil {
		listening <- s.Addr()
	}
	select {
	case err := <-s.failed:
		s.release()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// The stop sequence logs what did not stop in time; the exit status
	// stays 0.
	_ = s.Shutdown(context.WithoutCancel(ctx))
	return nil
}

// newHandler wires the use cases to the HTTP API (the commands to runner and
// its key latch, the queries to reader); tp, when not nil, traces
// its requests. With METRICS_ADDR set, the API leaves /metrics to the
// listener of serveMetrics. admit refuses /v1 while the schema is behind
// (schemaGate).
func newHandler(runner *store.Runner, reader app.Reader, ready func(context.Context) error, admit func() error, log *slog.Logger, reg *prometheus.Registry, c config, tp trace.TracerProvider) *httpapi.Server {
	return httpapi.NewServer(httpapi.Deps{Log: log, Registry: reg, Ready: ready, Admit: admit, App: app.New(app.Deps{Transactor: runner, Reader: reader, Latch: runner}), RequestTimeout: c.RequestTimeout,
		TracerProvider: tp, MetricsElsewhere: c.MetricsAddr != ""})
}

// serveHooks let tests hold the server at the steps of its stop sequence.
type serveHooks struct {
	// wrapListener wraps the listener (inside the connection tracker).
	wrapListener func(net.Listener) net.Listener
	// draining runs once /readyz answers 503, before SHUTDOWN_DRAIN is
	// waited out; closing once the listener is closed and idle connections
	// are on their grace; shutDown once http.Server.Shutdown returned.
	draining, closing, shutDown func()
	// plainShutdown skips the closing step: http.Server.Shutdown alone,
	// the naive variant that the shutdown tests must catch.
	plainShutdown bool
	// noSchemaGate serves whatever the schema: the naive variant that the
	// schema gate test must catch.
	noSchemaGate bool
	// spanProcessors see every span when tracing is on (tests record
	// spans with one); with tracing off there are no spans to see.
	spanProcessors []sdktrace.SpanProcessor
	// collectors are registered with the service's metrics (a test holds a
	// scrape in progress with one).
	collectors []prometheus.Collector
	// metricsListening receives the address of METRICS_ADDR's listener.
	metricsListening chan<- string
	// closeMetrics stops METRICS_ADDR's listener with http.Server.Close
	// instead of Shutdown: the naive variant that cuts a scrape in
	// progress, which the metrics listener's test must catch.
	closeMetrics bool
}

func (serveHooks) call(f func()) {
	if f != nil {
		f()
	}
}
