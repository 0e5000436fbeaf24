package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestJSONBodiesEndWithOneNewline: every JSON and problem body ends with
// exactly one newline, so that the next status line or prompt of a terminal
// starts on a line of its own. The newline is added when a body is sent and
// never stored: a replay is byte for byte the original, and the stored
// record is the bare JSON, as records kept from before the newline are;
// the fingerprint is of the request, so a repeat still replays and another
// body under the same key is still 422.
func TestJSONBodiesEndWithOneNewline(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	body := map[string]any{"sku": "NL-1", "name": "Newline", "price_cents": 100, "stock": 5}
	first := e.Do("POST", "/v1/products", e.Staff.Token, body, "Idempotency-Key", "nl-1")
	again := e.Do("POST", "/v1/products", e.Staff.Token, body, "Idempotency-Key", "nl-1")
	wantFresh(t, "create", first, http.StatusCreated)
	wantReplay(t, "create again", again, first)
	other := e.Do("POST", "/v1/products", e.Staff.Token, map[string]any{"sku": "NL-2", "name": "x", "price_cents": 1, "stock": 1}, "Idempotency-Key", "nl-1")
	wantProblem(t, "same key, another body", other, http.StatusUnprocessableEntity, "idempotency_key_reused")
	id := first.String("id")
	for what, r := range map[string]*httpkit.Response{
		"fresh 201":    first,
		"replayed 201": again,
		"problem 422":  other,
		"GET product":  e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil),
		"GET list":     e.Do("GET", "/v1/products", e.Staff.Token, nil),
		"problem 404":  e.Do("GET", "/v1/products/"+uuid.NewString(), e.Staff.Token, nil),
		"problem 401":  e.Do("GET", "/v1/products", "", nil),
	} {
		if len(r.Body) < 2 || r.Body[len(r.Body)-1] != '\n' || r.Body[len(r.Body)-2] == '\n' || r.JSON == nil {
			t.Errorf("%s: body %q does not end with exactly one newline after its JSON", what, r.Body)
		}
	}
	var stored []byte
	if err := e.Pool.QueryRow(t.Context(), `SELECT response_body FROM idempotency_keys WHERE key = 'nl-1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(stored, '\n'), first.Body) {
		t.Errorf("stored body %q, want the sent body %q without its newline", stored, first.Body)
	}
}

// TestHeadIsServedOnGetRoutes: HEAD on a GET route answers what GET answers,
// status and headers, without a body (RFC 9110 §9.3.2), /healthz and the
// authenticated /v1 reads included; on a route with no GET it is 405.
func TestHeadIsServedOnGetRoutes(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/openapi.yaml", "", http.StatusOK},
		{"/v1/products", e.Staff.Token, http.StatusOK},
		{"/v1/products/" + id, e.Staff.Token, http.StatusOK},
		{"/v1/products/" + id + "/stock", e.Staff.Token, http.StatusOK},
		{"/v1/products/" + id, "", http.StatusUnauthorized},
		{"/v1/products/" + uuid.NewString(), e.Staff.Token, http.StatusNotFound},
	} {
		get := e.Do("GET", c.path, c.token, nil)
		head := e.Do("HEAD", c.path, c.token, nil)
		if head.Err != nil || head.Status != c.status || get.Status != c.status {
			t.Errorf("HEAD %s: %d (GET %d) %v, want %d", c.path, head.Status, get.Status, head.Err, c.status)
			continue
		}
		if len(head.Body) != 0 {
			t.Errorf("HEAD %s has a body: %q", c.path, head.Body)
		}
		for _, h := range []string{"Content-Type", "ETag"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("HEAD %s: %s %q, GET's %q", c.path, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
	}
	head := e.Do("HEAD", "/v1/orders/"+uuid.NewString()+"/ship", e.Staff.Token, nil)
	if head.Status != http.StatusMethodNotAllowed {
		t.Errorf("HEAD on a POST-only route: %d, want 405", head.Status)
	}
}

// TestNotFoundHasOneDetail: an unknown path, a malformed id and a well-formed
// id with nothing behind it are the same kind of miss, and answer the same
// 404 problem detail.
func TestNotFoundHasOneDetail(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	details := map[string]string{}
	for _, p := range []string{
		"/v1/products/" + uuid.NewString(),
		"/v1/products/not-an-id",
		"/v1/orders/" + uuid.NewString(),
		"/v1/orders/42",
		"/v1/products/" + uuid.NewString() + "/stock",
		"/v1/nothing-here",
		"/nothing-here",
	} {
		r := e.Do("GET", p, e.Staff.Token, nil)
		wantProblem(t, "GET "+p, r, http.StatusNotFound, "not_found")
		details[r.String("detail")] = p
	}
	if len(details) != 1 {
		t.Errorf("404 details differ: %v", details)
	}
}
