package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestServerSpanErrorType: a traced request that answers 5xx has its status
// code as the span's error.type (OpenTelemetry's HTTP conventions); 2xx and
// 4xx answers have none, a caller's mistake being no server error.
func TestServerSpanErrorType(t *testing.T) {
	t.Parallel()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	s := NewServer(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(), TracerProvider: tp})
	for _, status := range []int{http.StatusOK, http.StatusNotFound, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		h := s.traced()(s.observe(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) })))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/orders", nil))
	}
	spans := recorder.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, want := range []string{"", "", "500", "503"} {
		got := ""
		for _, kv := range spans[i].Attributes() {
			if kv.Key == "error.type" {
				got = kv.Value.String()
			}
		}
		if got != want {
			t.Errorf("span %d: error.type %q, want %q", i, got, want)
		}
	}
}
