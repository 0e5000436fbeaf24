package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// The benchmarks of the in-process hot path of a request: what the service
// spends besides waiting for PostgreSQL. Run them with
//
//	go test -run '^$' -bench . -benchmem ./internal/httpapi/ ./internal/app/
//
// They need no database.

// discardWriter is a ResponseWriter that keeps nothing, so that the
// benchmarks measure the code under test and not httptest's recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header, 8)} }

func (w *discardWriter) reset() { clear(w.h) }

// routed returns a request that chi has routed to pattern with params.
func routed(method, path, pattern string, params ...string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	rc := chi.NewRouteContext()
	rc.RoutePatterns = []string{pattern}
	for i := 0; i+1 < len(params); i += 2 {
		rc.URLParams.Add(params[i], params[i+1])
	}
	return r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))
}

func benchOrder() *domain.Order {
	lines := []domain.OrderLine{
		{ProductID: uuid.MustParse("00000000-0000-7000-8000-000000000017"), Quantity: 2, UnitPrice: 1250},
		{ProductID: uuid.MustParse("00000000-0000-7000-8000-000000004242"), Quantity: 1, UnitPrice: 990},
		{ProductID: uuid.MustParse("00000000-0000-7000-8000-000000009001"), Quantity: 3, UnitPrice: 305},
	}
	t := time.Date(2026, 12, 2, 17, 3, 58, 372298000, time.UTC)
	return domain.RehydrateOrder(domain.OrderRecord{
		ID: uuid.MustParse("01a237b6-85a5-7acf-9996-41632f2c0246"), CustomerID: uuid.MustParse("01a237b6-4747-7be8-bca2-bdacd4bae07a"),
		Status: domain.StatusPlaced, Lines: lines, Total: 4405, Version: 1, CreatedAt: t, UpdatedAt: t,
	})
}

func benchPlaceCommand() app.PlaceOrderCommand {
	o := benchOrder()
	cmd := app.PlaceOrderCommand{}
	for _, l := range o.Lines() {
		cmd.Lines = append(cmd.Lines, domain.LineRequest{ProductID: l.ProductID, Quantity: l.Quantity})
	}
	return cmd
}

// BenchmarkFingerprint is the canonical form and SHA-256 of a three-line
// placement: computed for every keyed write.
func BenchmarkFingerprint(b *testing.B) {
	cmd := benchPlaceCommand()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := fingerprints(fingerprintForms, "placeOrder", cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFingerprintWithPathParams is a cancel: an id and an If-Match set.
func BenchmarkFingerprintWithPathParams(b *testing.B) {
	id := "01a237b6-85a5-7acf-9996-41632f2c0246"
	cmd := app.CancelOrderCommand{ID: uuid.MustParse(id), Expected: []domain.Version{3}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := fingerprints(fingerprintForms, "cancelOrder", cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProblemRendering writes a 409 problem with its detail, as every
// refused request does.
func BenchmarkProblemRendering(b *testing.B) {
	s := NewServer(Deps{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	r := routed("POST", "/v1/orders", "/v1/orders")
	w := newDiscardWriter()
	err := &domain.InsufficientStockError{ProductID: uuid.MustParse("00000000-0000-7000-8000-000000000017"), Requested: 5, Available: 2}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		s.writeError(w, r, err)
	}
}

// BenchmarkIfMatch parses a typical If-Match header.
func BenchmarkIfMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if m := parseIfMatch([]string{`"v17"`}); len(m.versions) != 1 {
			b.Fatal(m)
		}
	}
}

// BenchmarkIfMatchList parses a list with a weak tag first.
func BenchmarkIfMatchList(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if m := parseIfMatch([]string{`W/"v16", "v17"`}); len(m.versions) != 1 {
			b.Fatal(m)
		}
	}
}

// BenchmarkRenderOrder is the JSON body and the replayable headers of a
// placed order: the receipt that is both sent and stored for replay.
func BenchmarkRenderOrder(b *testing.B) {
	o := benchOrder()
	render := receiptOf(http.StatusCreated, entity(app.NewOrderData, "/v1/orders"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render(o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteOrderJSON is a GET of an order: encode and write.
func BenchmarkWriteOrderJSON(b *testing.B) {
	w := newDiscardWriter()
	o := benchOrder()
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		if err := writeJSON(w, http.StatusOK, app.NewOrderData(o)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseKey reads a bare Idempotency-Key header.
func BenchmarkParseKey(b *testing.B) {
	h := []string{"bench-17-123456"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := parseKey(h); !ok {
			b.Fatal("refused")
		}
	}
}
