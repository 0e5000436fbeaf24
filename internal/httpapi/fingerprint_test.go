package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestRetryAcrossAFormChangeReplays: a stock adjustment is recorded by the
// release whose canonical form of adjustStock is v1; its response is lost,
// and the client retries it, same key, against the next release, whose
// form is v2. That release still lists v1 as its previous form, so the retry
// replays the recorded 201. A release that dropped v1 too early (the
// naive variant) tells the client it sent a different request (422
// idempotency_key_reused), which it did not.
func TestRetryAcrossAFormChangeReplays(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	release := func(keepPrevious bool) *httpkit.Env { // the same database, served by the next release
		s := httpapi.NewServer(httpapi.Deps{Log: testkit.Logger(t), Registry: prometheus.NewRegistry(), Ready: e.Runner.Ping, App: e.App})
		httpapi.MoveFormToNextVersion(s, "adjustStock", keepPrevious)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		at := *e
		at.Server = srv
		return &at
	}
	next, tooEarly := release(true), release(false)
	body := map[string]any{"delta": 5, "reason": "restock"}
	first := e.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, body, "Idempotency-Key", "across")
	if first.Status != http.StatusCreated {
		t.Fatalf("v1 release: %d %s", first.Status, first.Body)
	}
	retry := next.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, body, "Idempotency-Key", "across")
	if retry.Status != http.StatusCreated || retry.Header.Get("Idempotent-Replayed") != "true" || string(retry.Body) != string(first.Body) {
		t.Errorf("retry against the v2 release: %d (replayed %q) %s, want the v1 release's 201 replayed", retry.Status,
			retry.Header.Get("Idempotent-Replayed"), retry.Body)
	}
	naive := tooEarly.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, body, "Idempotency-Key", "across")
	if naive.Status != http.StatusUnprocessableEntity || naive.Code() != "idempotency_key_reused" {
		t.Fatalf("the release without v1 answered %d %s: the test cannot tell whether the previous form matters", naive.Status, naive.Body)
	}
	t.Logf("naive variant (v1 dropped): %d %s", naive.Status, naive.Code())
	if s := e.QueryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, product); s != 15 {
		t.Errorf("stock %d, want 15: the adjustment applied more than once", s)
	}
}

// TestIfMatchListOrderDoesNotChangeTheRequest: If-Match "v1", "v5", then
// "v5", "v1" with the same key is one request (RFC 9110 gives the list set
// semantics): the second replays the first's answer, it is not 422.
func TestIfMatchListOrderDoesNotChangeTheRequest(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	order := e.Do("POST", "/v1/orders", customer.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}},
		"Idempotency-Key", "o")
	if order.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", order.Status, order.Body)
	}
	id := order.String("id")
	first := e.Do("POST", "/v1/orders/"+id+"/cancel", customer.Token, nil, "If-Match", `"v1", "v5"`, "Idempotency-Key", "c")
	second := e.Do("POST", "/v1/orders/"+id+"/cancel", customer.Token, nil, "If-Match", `"v5", "v1"`, "Idempotency-Key", "c")
	if first.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", first.Status, first.Body)
	}
	if second.Status != http.StatusOK || second.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same cancel with the tags in another order: %d %s, want the first's 200 replayed", second.Status, second.Body)
	}
}
