package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// placementRun is what one traced (or untraced) run of serve left behind.
type placementRun struct {
	spans   []sdktrace.ReadOnlySpan
	logs    []map[string]any // the JSON log lines
	webhook http.Header      // headers of the order.placed delivery
	exports int64            // requests the OTLP receiver got
	scrape  string           // GET /metrics in OpenMetrics, after the placement
}

// placeOrderUnderServe runs serve with the given extra settings and a span
// recorder hooked in, creates a product, places an order, waits until the
// webhook received its order.placed event, and stops serve. Everything is
// read after serve returned, so the tracer provider has been shut down and
// its spans flushed.
func placeOrderUnderServe(t *testing.T, extra ...string) placementRun {
	t.Helper()
	url := testkit.DB(t)

	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An OTLP/HTTP receiver that accepts and discards.
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			exports.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()

	delivered := make(chan http.Header, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Type string }
		_ = json.NewDecoder(r.Body).Decode(&ev)
		if ev.Type == "order.placed" {
			select {
			case delivered <- r.Header.Clone():
			default:
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	kv := []string{
		"DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "OUTBOX_WEBHOOK_URL", hook.URL,
		"OUTBOX_POLL_INTERVAL", "50ms", "LOG_LEVEL", "info", "SHUTDOWN_TIMEOUT", "5s",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v := strings.ReplaceAll(extra[i+1], "$COLLECTOR", collector.URL)
		kv = append(kv, extra[i], v)
	}
	getenv := env(kv...)
	ctx := context.Background()
	actor := func(args ...string) string {
		var out bytes.Buffer
		if err := run(ctx, append([]string{"actor", "create"}, args...), getenv, &out); err != nil {
			t.Fatal(err)
		}
		var a struct{ Token string }
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a.Token
	}
	staff := actor("--name", "Staff", "--role", "staff")
	customer := actor("--name", "Cust", "--role", "customer", "--credit-limit-cents", "100000")

	recorder := tracetest.NewSpanRecorder()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	listening := make(chan string, 1)
	served := make(chan error, 1)
	var logs lockedBuffer
	go func() {
		served <- serve(sctx, getenv, io.MultiWriter(t.Output(), &logs), listening, serveHooks{spanProcessors: []sdktrace.SpanProcessor{recorder}})
	}()
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr
	case err := <-served:
		t.Fatalf("serve ended before listening: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	call := func(method, path, token, body string, headers ...string) map[string]any {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	product := call("POST", "/v1/products", staff, `{"sku":"TRACE-1","name":"Mug","price_cents":500,"stock":3}`)
	call("POST", "/v1/orders", customer, `{"lines":[{"product_id":"`+product["id"].(string)+`","quantity":2}]}`, "Idempotency-Key", "trace-1")
	call("GET", "/healthz", "", "")

	var got placementRun
	select {
	case got.webhook = <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("no order.placed delivery within 30s")
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("GET /metrics asking for OpenMetrics: Content-Type %q", ct)
	}
	got.scrape = string(raw)
	client.CloseIdleConnections()
	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	got.spans = recorder.Ended()
	got.exports = exports.Load()
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err == nil {
			got.logs = append(got.logs, m)
		}
	}
	return got
}

// TestTracing: with OTEL_EXPORTER_OTLP_ENDPOINT set, a placement is a server
// span named after its route with the database round trips as its children
// (batches included), the request's log line carries its trace id and span
// id, its latency observation carries the trace id as exemplar in an
// OpenMetrics scrape, the
// webhook delivery is a span of its own whose context the request carries as
// traceparent, the probes are not traced, and the spans reach the OTLP
// endpoint by the time serve has stopped (the shutdown flushes them).
func TestTracing(t *testing.T) {
	t.Parallel()
	got := placeOrderUnderServe(t, "OTEL_EXPORTER_OTLP_ENDPOINT", "$COLLECTOR", "OTEL_SERVICE_NAME", "ordersvc-test")

	var server sdktrace.ReadOnlySpan
	var servers []string
	for _, s := range got.spans {
		if s.SpanKind() == trace.SpanKindServer {
			servers = append(servers, s.Name())
			if s.Name() == "POST /v1/orders" {
				server = s
			}
		}
	}
	if server == nil {
		t.Fatalf("no server span named POST /v1/orders; server spans: %q", servers)
	}
	if len(servers) != 2 {
		t.Errorf("server spans %q, want the two API calls only (GET /healthz is not traced)", servers)
	}
	if route, _ := attr(server, "http.route"); route != "/v1/orders" {
		t.Errorf("http.route = %q, want /v1/orders", route)
	}
	if got := server.Resource().Attributes(); !hasAttr(got, "service.name", "ordersvc-test") {
		t.Errorf("resource %v lacks service.name=ordersvc-test (OTEL_SERVICE_NAME)", got)
	}

	tid := server.SpanContext().TraceID()
	var roundTrips []string
	batches := 0
	for _, s := range got.spans {
		if s.Parent().SpanID() != server.SpanContext().SpanID() {
			continue
		}
		if sys, _ := attr(s, "db.system.name"); sys != "postgresql" || s.SpanKind() != trace.SpanKindClient {
			continue
		}
		if s.SpanContext().TraceID() != tid {
			t.Errorf("database span %q in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), tid)
		}
		if _, ok := attr(s, "db.operation.batch.size"); ok {
			batches++
		}
		roundTrips = append(roundTrips, s.Name())
	}
	t.Logf("the placement's round trips: %q", roundTrips)
	if len(roundTrips) < 2 || batches == 0 || !strings.Contains(strings.Join(roundTrips, " | "), "commit") {
		t.Errorf("database spans under the placement %q (%d batches): want its round trips, batches among them, COMMIT the last", roundTrips, batches)
	}

	var logged []string
	for _, l := range got.logs {
		if l["msg"] == "request" && l["route"] == "/v1/orders" && l["method"] == "POST" {
			id, _ := l["trace_id"].(string)
			span, _ := l["span_id"].(string)
			logged = append(logged, id+"/"+span)
		}
	}
	if want := tid.String() + "/" + server.SpanContext().SpanID().String(); len(logged) != 1 || logged[0] != want {
		t.Errorf("the placement's log line has trace_id/span_id %q, want %s (the server span's)", logged, want)
	}

	// The placement's latency observation carries its trace id as exemplar.
	exemplar := regexp.MustCompile(`(?m)^ordersvc_http_request_duration_seconds_bucket\{method="POST",route="/v1/orders",le="[^"]+"\} 1 # \{trace_id="([0-9a-f]{32})"\} `)
	if m := exemplar.FindStringSubmatch(got.scrape); m == nil || m[1] != tid.String() {
		t.Errorf("no latency bucket of POST /v1/orders carries the exemplar trace_id=%s; scrape:\n%s", tid, grepLines(got.scrape, "ordersvc_http_request_duration_seconds_bucket"))
	}

	parent := got.webhook.Get("traceparent")
	parts := strings.Split(parent, "-")
	if len(parts) != 4 || parts[0] != "00" || parts[3] != "01" {
		t.Fatalf("webhook traceparent %q, want 00-<trace id>-<span id>-01", parent)
	}
	var delivery sdktrace.ReadOnlySpan
	for _, s := range got.spans {
		if s.SpanContext().TraceID().String() == parts[1] && s.SpanContext().SpanID().String() == parts[2] {
			delivery = s
		}
	}
	if delivery == nil {
		t.Fatalf("no recorded span has the webhook's traceparent %s", parent)
	}
	if delivery.Name() != "deliver order.placed" || delivery.SpanKind() != trace.SpanKindProducer || delivery.Parent().IsValid() {
		t.Errorf("delivery span %q kind %v parent %v: want the root span deliver order.placed, a producer", delivery.Name(), delivery.SpanKind(), delivery.Parent())
	}
	if delivery.SpanContext().TraceID() == tid {
		t.Error("the delivery is in the placement's trace; it is a trace of its own")
	}

	if got.exports == 0 {
		t.Error("the OTLP endpoint received no spans by the time serve stopped")
	}
}

// TestTracingOffRecordsNothing: without OTEL_EXPORTER_OTLP_ENDPOINT there is
// no tracer provider: the same placement records no span (the recorder is
// hooked in all the same), its log line has no trace_id, its latency has no
// exemplar, and the webhook request carries no traceparent.
func TestTracingOffRecordsNothing(t *testing.T) {
	t.Parallel()
	got := placeOrderUnderServe(t)
	if len(got.spans) != 0 {
		t.Errorf("%d spans recorded with tracing off, e.g. %q", len(got.spans), got.spans[0].Name())
	}
	if tp := got.webhook.Get("traceparent"); tp != "" {
		t.Errorf("webhook traceparent %q with tracing off", tp)
	}
	requests := 0
	for _, l := range got.logs {
		if l["msg"] == "request" {
			requests++
			if _, ok := l["trace_id"]; ok {
				t.Errorf("request log line with a trace_id: %v", l)
			}
		}
	}
	if requests == 0 {
		t.Error("no request log line")
	}
	if !strings.Contains(got.scrape, `ordersvc_http_request_duration_seconds_bucket{method="POST",route="/v1/orders"`) || strings.Contains(got.scrape, "trace_id") {
		t.Errorf("with tracing off, the latency buckets must be there with no exemplar:\n%s", grepLines(got.scrape, "ordersvc_http_request_duration_seconds_bucket"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

// lockedBuffer is a bytes.Buffer that serve's goroutines may write while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
