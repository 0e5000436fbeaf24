package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// panicInTx is a transactor whose transactions panic before their first
// statement: a bug inside a /v1 handler, after authentication and before
// the request's token check has reached the database.
// Armed once the test's data is made.
type panicInTx struct {
	app.Transactor
	armed *atomic.Bool
}

func (p panicInTx) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(context.Context, app.Repositories) error) error {
	if p.armed.Load() {
		panic("a bug in a use case")
	}
	return p.Transactor.InTx(ctx, auth, iso, fn)
}

// TestPanicInsideAHandlerAnswersAfterTheTokenCheck: a handler that panics
// is answered from inside the auth gate, so the answer still waits for the
// token check (ADR 0005). A token the cache knows, whose actor was
// deactivated, gets 401 unauthenticated, not the 500 that a recovery
// outside the gate wrote before the check was settled; an active actor's
// request gets the 500 internal problem, with no internals in its body.
func TestPanicInsideAHandlerAnswersAfterTheTokenCheck(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	e := httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor { return panicInTx{inner, &armed} }})
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	active := e.NewCustomer(1_000_000)
	gone := e.NewCustomer(1_000_000)
	for _, a := range []testkit.Actor{active, gone} { // the token cache learns both tokens
		if r := e.Do("GET", "/v1/products/"+product, a.Token, nil); r.Status != http.StatusOK {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
	}
	e.Exec(`UPDATE actors SET active = false WHERE id = $1`, gone.ID)
	armed.Store(true)

	body := map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}}
	r := e.Do("POST", "/v1/orders", gone.Token, body, "Idempotency-Key", "k")
	if r.Status != http.StatusUnauthorized || r.Code() != "unauthenticated" || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("deactivated actor, panicking handler: %d %s, want 401 unauthenticated with WWW-Authenticate", r.Status, r.Body)
	}
	r = e.Do("POST", "/v1/orders", active.Token, body, "Idempotency-Key", "k")
	if r.Status != http.StatusInternalServerError || r.Code() != "internal" {
		t.Errorf("active actor, panicking handler: %d %s, want 500 internal", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), "a bug in a use case") || strings.Contains(string(r.Body), "goroutine") {
		t.Errorf("the 500 body carries internals: %s", r.Body)
	}
}
