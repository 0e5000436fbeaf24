// Package httpapi is the HTTP boundary: routing, authentication, strict JSON
// decoding, Problem Details, ETag preconditions and idempotency-key handling.
// Handlers turn requests into application commands and render the outcomes.
package httpapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
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
	// handlers themselves are methods (s.placeOrder).
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
	// (fingerprintForms; a test swaps them to move a form to its next
	// version).
	forms map[string][]fingerprintForm
}

// NewServer builds the handler with every route of the API (see routes.go).
func NewServer(d Deps) *Server {
	s := &Server{app: d.App, ready: d.Ready, admit: d.Admit, reg: d.Registry, log: d.Log, metrics: newMetrics(d.Registry),
		requestTimeout: d.RequestTimeout, tracing: d.TracerProvider, metricsHere: !d.MetricsElsewhere, forms: fingerprintForms}
	s.router = s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// keyedOperations are the operations that take an Idempotency-Key (the
// scope's operation name); ifMatchRoutes the routes that take If-Match.
var (
	keyedOperations = []string{"createProduct", "updateProduct", "adjustStock", "placeOrder", "cancelOrder", "shipOrder", "recordPayment", "recordRefund", "deactivateActor"}
	ifMatchRoutes   = []string{"/v1/products/{id}", "/v1/orders/{id}/cancel", "/v1/orders/{id}/ship"}
)

// latencyBuckets reach past REQUEST_TIMEOUT (15 s by default) to twice it:
// a request that ran into its deadline lands in a bucket of its own, not in
// +Inf with everything above 5 s.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 20, 30}

type metrics struct {
	requests         *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	replays          *prometheus.CounterVec
	keyConflicts     *prometheus.CounterVec
	versionConflicts *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ordersvc_http_request_duration_seconds", Help: "HTTP request latency by route pattern and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_idempotency_replays_total", Help: "Responses replayed from a completed idempotency record, by operation.",
		}, []string{"operation"}),
		keyConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_idempotency_conflicts_total", Help: "Idempotency keys refused: reused with other input, or still in progress.",
		}, []string{"code"}),
		versionConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_version_conflicts_total", Help: "Writes refused because If-Match named a version that is not current, by route.",
		}, []string{"route"}),
	}
	// Every series whose labels are a closed set exists from the start, at
	// zero, so that rate() and alerts see it before its first increment.
	for _, op := range keyedOperations {
		m.replays.WithLabelValues(op)
	}
	for _, code := range []string{string(domain.CodeKeyReused), string(domain.CodeKeyInProgress)} {
		m.keyConflicts.WithLabelValues(code)
	}
	for _, route := range ifMatchRoutes {
		m.versionConflicts.WithLabelValues(route)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.replays, m.keyConflicts, m.versionConflicts)
	}
	return m
}

// ---- middleware

// withDeadline gives the request's context the whole-request deadline.
func (s *Server) withDeadline(next http.Handler) http.Handler {
	if s.requestTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.requestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// withRequestID takes a sane X-Request-Id from the caller or makes one, and
// echoes it on the response.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// traced starts the request's server span (otelhttp), continuing the
// caller's trace when the request carries a W3C traceparent. The probes and
// the metrics scrape, polled every few seconds by machines, are not traced.
func (s *Server) traced() func(http.Handler) http.Handler {
	return otelhttp.NewMiddleware("http.server",
		otelhttp.WithTracerProvider(s.tracing),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), // the service's metrics are Prometheus's
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/healthz", "/livez", "/readyz", "/metrics":
				return false
			}
			return true
		}),
	)
}

// observe logs one line per request and records the request metrics, by route
// pattern so that ids do not explode the label space. It also turns a panic
// into a 500 problem with no internals. When the request is traced, its span
// is named after the route pattern ("POST /v1/orders", known only once
// routed), a 5xx answer sets the span's error.type to the status code (as
// OpenTelemetry's HTTP conventions say), and the latency observation carries
// the trace id as its exemplar (exposed when a scraper asks for
// OpenMetrics), so a slow bucket leads to a trace of a request that fell in
// it. The log line's trace_id and span_id come from the logger, which reads
// them from the request's context.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if rec := recover(); rec != nil {
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				s.log.ErrorContext(r.Context(), "panic serving request", "panic", rec)
				if sw.status == 0 {
					s.writeProblem(sw, r, problem(domain.CodeInternal, "an internal error occurred"))
				}
			}
			route := routeOf(r)
			status := strconv.Itoa(sw.status)
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(route, r.Method, status).Inc()
			var exemplar prometheus.Labels
			attrs := []slog.Attr{
				slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
				slog.Int("status", sw.status), slog.Int("bytes", sw.bytes), slog.Duration("duration", elapsed),
				slog.String("request_id", requestID(r.Context())),
			}
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
				if route != "unmatched" {
					span.SetName(r.Method + " " + route)
					span.SetAttributes(semconv.HTTPRoute(route))
				}
				if sw.status >= 500 {
					span.SetAttributes(semconv.ErrorTypeKey.String(status))
				}
				if sc := span.SpanContext(); sc.IsSampled() {
					exemplar = prometheus.Labels{"trace_id": sc.TraceID().String()}
				}
			}
			latency := s.metrics.latency.WithLabelValues(route, r.Method)
			if exemplar != nil {
				latency.(prometheus.ExemplarObserver).ObserveWithExemplar(elapsed.Seconds(), exemplar)
			} else {
				latency.Observe(elapsed.Seconds())
			}
			s.log.LogAttrs(r.Context(), logLevelFor(sw.status), "request", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// authenticate requires a valid bearer token on every /v1 route.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			s.writeError(w, r, app.ErrUnauthenticated)
			return
		}
		ctx, p, err := s.app.Authenticate.Handle(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(ctx, principalKey, p))
		if app.AuthCheckOf(ctx) == nil {
			next.ServeHTTP(w, r)
			return
		}
		g := &authGate{ResponseWriter: w, s: s, r: r}
		defer g.recoverPanic()
		next.ServeHTTP(g, r)
		g.decide() // a handler that wrote nothing still answers only after the check
	})
}

// recoverPanic answers a handler's panic from inside the gate: the 500
// goes through the gate like any answer, so a refused token check still
// answers 401 (observe's recovery, outside the gate, would send the 500
// before the check was settled). A panic after the handler began its
// response ends that response as observe would.
func (g *authGate) recoverPanic() {
	rec := recover()
	if rec == nil {
		return
	}
	if rec == http.ErrAbortHandler || g.wrote {
		panic(rec)
	}
	g.s.log.ErrorContext(g.r.Context(), "panic serving request", "panic", rec)
	g.s.writeProblem(g, g.r, problem(domain.CodeInternal, "an internal error occurred"))
}

// authGate holds a response back until the request's token check is
// settled (app.AuthCheck). The check normally rides in front of the
// request's first statement; a request that answers without sending one (a
// validation error, a malformed id) confirms the token with a lookup of its
// own before anything is written. A refused check answers 401 instead of
// what the handler meant to send, and a check the database could not settle
// answers 503: never is a response sent on the cache's word alone. A check
// that passed becomes pending again when the request waits (a key, a retry),
// so an answer after a wait is held back the same way.
type authGate struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	decided bool
	refused bool
	wrote   bool // the handler began its response
}

func (g *authGate) decide() {
	if g.decided {
		return
	}
	g.decided = true
	err := g.s.app.Authenticate.Confirm(g.r.Context())
	if err == nil {
		return
	}
	g.refused = true
	h := g.ResponseWriter.Header()
	for k := range h {
		if k != "X-Request-Id" {
			delete(h, k)
		}
	}
	g.s.writeError(g.ResponseWriter, g.r, err)
}

func (g *authGate) WriteHeader(code int) {
	g.wrote = true
	g.decide()
	if !g.refused {
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *authGate) Write(b []byte) (int, error) {
	g.wrote = true
	g.decide()
	if g.refused {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

func (g *authGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func principal(r *http.Request) app.Principal {
	p, _ := r.Context().Value(principalKey).(app.Principal)
	return p
}

// ---- operational endpoints

// healthz answers /healthz and /livez (the name Kubernetes' own endpoints
// use): the process is up and serving. It never touches the database, so a
// database outage does not make an orchestrator restart every replica.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// ErrShuttingDown is what Deps.Ready returns once the process has been told
// to stop: /readyz then answers 503 so that load balancers stop sending
// requests, while the other endpoints are still served.
var ErrShuttingDown = errors.New("shutting down")

// ErrSchemaBehind is what Deps.Ready and Deps.Admit return while the
// database lacks a migration this release needs: /readyz and every /v1
// request answer 503 with Retry-After until `api migrate up` has run.
var ErrSchemaBehind = errors.New("the database schema is older than this release needs")

// schemaBehindRetry is the Retry-After of a request refused for the schema:
// a migration takes seconds, not the one second of a lock wait.
const schemaBehindRetry = "5"

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		if errors.Is(err, ErrShuttingDown) {
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the service is shutting down"))
			return
		}
		if errors.Is(err, ErrSchemaBehind) {
			w.Header().Set("Retry-After", schemaBehindRetry)
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database schema is older than this release needs; waiting for its migration"))
			return
		}
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database does not answer"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// admitted refuses every /v1 request while Deps.Admit says the schema is
// behind, with 503 and Retry-After: a client retries, nothing reads a table
// or column that is not there yet.
func (s *Server) admitted(next http.Handler) http.Handler {
	if s.admit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.admit(); err != nil {
			w.Header().Set("Retry-After", schemaBehindRetry)
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database schema is older than this release needs; retry later"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPI)
}

// Metrics is GET /metrics: the Prometheus text format, or OpenMetrics when
// the scraper asks for it (Accept: application/openmetrics-text), which is
// the format that carries the latency histograms' exemplars. The process
// mounts it on its own listener when METRICS_ADDR is set.
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
