package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// metricsOperations is the scrape endpoint (operations.go joins the lists).
func metricsOperations() []operation {
	return []operation{
		{name: "metrics", method: "GET", route: "/metrics", status: 200, serve: (*Server).metricsRoute},
	}
}

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
				s.answerPanic(sw, r, rec)
			}
			s.record(r, sw, time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// answerPanic logs a handler's panic and answers 500 unless the response
// has begun. http.ErrAbortHandler is net/http's own way to abort a
// response: it goes on up, unrecorded.
func (s *Server) answerPanic(sw *statusWriter, r *http.Request, rec any) {
	if rec == http.ErrAbortHandler {
		panic(rec)
	}
	s.log.ErrorContext(r.Context(), "panic serving request", "panic", rec)
	if sw.status == 0 {
		s.writeProblem(sw, r, problem(domain.CodeInternal, "an internal error occurred"))
	}
}

// record counts the request, observes its latency and logs its line.
func (s *Server) record(r *http.Request, sw *statusWriter, elapsed time.Duration) {
	route := routeOf(r)
	s.metrics.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
	latency := s.metrics.latency.WithLabelValues(route, r.Method)
	if exemplar := annotateSpan(r, route, sw.status); exemplar != nil {
		latency.(prometheus.ExemplarObserver).ObserveWithExemplar(elapsed.Seconds(), exemplar)
	} else {
		latency.Observe(elapsed.Seconds())
	}
	s.log.LogAttrs(r.Context(), logLevelFor(sw.status), "request",
		slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.Int("status", sw.status), slog.Int("bytes", sw.bytes), slog.Duration("duration", elapsed),
		slog.String("request_id", requestID(r.Context())))
}

// annotateSpan names the request's span after its route and marks a 5xx
// answer as its error.type; it returns the exemplar labels (the trace id)
// when the span is sampled, nil otherwise.
func annotateSpan(r *http.Request, route string, status int) prometheus.Labels {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return nil
	}
	if route != "unmatched" {
		span.SetName(r.Method + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	}
	if sc := span.SpanContext(); sc.IsSampled() {
		return prometheus.Labels{"trace_id": sc.TraceID().String()}
	}
	return nil
}

func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// Metrics is GET /metrics: the Prometheus text format, or OpenMetrics when
// the scraper asks for it (Accept: application/openmetrics-text), which is
// the format that carries the latency histograms' exemplars. The process
// mounts it on its own listener when METRICS_ADDR is set.
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// metricsRoute serves the metrics operation among the routes, unless the
// process serves them on a listener of their own.
func (s *Server) metricsRoute(operation) http.Handler {
	if !s.metricsHere {
		return nil
	}
	return s.Metrics()
}
