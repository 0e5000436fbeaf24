// Package httpapi is the HTTP boundary: routing, authentication, strict JSON
// decoding, Problem Details, ETag preconditions and idempotency-key handling.
// Handlers turn requests into application commands and render the outcomes.
// Each operation is declared once, in its resource file's list of
// operations (orderOperations in orders.go, …), joined in operations.go.
package httpapi

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
)

//go:embed openapi.yaml
var openAPI []byte

// Deps are what the server needs: the use cases, a readiness probe, a logger
// and a metrics registry.
type Deps struct {
	Log      *slog.Logger
	Registry *prometheus.Registry
	Ready    func(context.Context) error
	// Admit, when set, is asked before each /v1 request: while it returns
	// an error (ErrSchemaBehind), the request is refused with 503
	// unavailable and Retry-After, before anything reads the database.
	Admit func() error
	App   app.UseCases
	// RequestTimeout bounds each /v1 request as a whole (REQUEST_TIMEOUT):
	// its context ends then, and with it every wait for a connection, a
	// lock or a statement, including one queued in a connection pooler
	// while the database is down. Zero means no deadline.
	RequestTimeout time.Duration
	// TracerProvider, when set, records a server span for each request
	// (otelhttp), named after its route pattern, and attaches its trace id
	// as an exemplar to the request's latency observation. Nil: tracing is
	// off and costs nothing.
	TracerProvider trace.TracerProvider
	// MetricsElsewhere leaves GET /metrics out of the routes: the process
	// serves Metrics on a listener of its own (METRICS_ADDR).
	MetricsElsewhere bool
}

// Server is the HTTP API.
type Server struct {
	// app holds the use cases the handlers call (s.app.PlaceOrder); the
	// handlers are built by methods (s.placeOrder) that the operations
	// table names.
	app            app.UseCases
	ready          func(context.Context) error
	admit          func() error
	reg            *prometheus.Registry
	log            *slog.Logger
	metrics        *metrics
	router         chi.Router
	requestTimeout time.Duration
	tracing        trace.TracerProvider
	// metricsHere says whether GET /metrics is one of the routes.
	metricsHere bool
	// forms are the canonical forms of the keyed operations' fingerprints
	// (fingerprintForms, from the operations table; a test swaps them to
	// move a form to its next version).
	forms map[string][]fingerprintForm
}

// NewServer builds the handler with every operation of the API (see
// operations.go, the resource files' lists, and routes.go).
func NewServer(d Deps) *Server {
	s := &Server{app: d.App, ready: d.Ready, admit: d.Admit, reg: d.Registry, log: d.Log, metrics: newMetrics(d.Registry),
		requestTimeout: d.RequestTimeout, tracing: d.TracerProvider, metricsHere: !d.MetricsElsewhere, forms: fingerprintForms}
	s.router = s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }
