package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// adjust sends one stock adjustment of product id with key.
func adjust(e *httpkit.Env, token, id string, delta int, key string) *httpkit.Response {
	return e.Do("POST", adjustPath(id), token, map[string]any{"delta": delta, "reason": "count"}, "Idempotency-Key", key)
}

// wantFresh fails unless r is a first execution with status.
func wantFresh(t *testing.T, what string, r *httpkit.Response, status int) {
	t.Helper()
	if r.Status != status || replayed(r) {
		t.Fatalf("%s: %d (replayed %v) %s, want a fresh %d", what, r.Status, replayed(r), r.Body, status)
	}
}

// wantReplay fails unless r replays orig: same status and body, marked.
func wantReplay(t *testing.T, what string, r, orig *httpkit.Response) {
	t.Helper()
	if r.Status != orig.Status || !replayed(r) || !bytes.Equal(r.Body, orig.Body) {
		t.Fatalf("%s: %d (replayed %v) %s, want the replay of %d %s", what, r.Status, replayed(r), r.Body, orig.Status, orig.Body)
	}
}

// keyRows counts the stored idempotency records.
func keyRows(e *httpkit.Env) int64 { return e.QueryInt(`SELECT count(*) FROM idempotency_keys`) }

// TestIdempotencyKeyReusedWithOtherBody: the same key with a different
// request is 422 idempotency_key_reused and changes nothing
// (EXT.IDEMPOTENCY.KEY.001: reject reuse with a different fingerprint).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyKeyReusedWithOtherBody(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	wantFresh(t, "first", adjust(e, e.Staff.Token, id, 1, "k1"), http.StatusCreated)
	r := adjust(e, e.Staff.Token, id, 2, "k1")
	if r.Status != http.StatusUnprocessableEntity || r.Code() != "idempotency_key_reused" {
		t.Fatalf("same key, other delta: %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
	}
	other := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	if r := adjust(e, e.Staff.Token, other, 1, "k1"); r.Code() != "idempotency_key_reused" {
		t.Fatalf("same key, same body, other product (path parameter): %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
	}
	if s := stockOf(e, id); s != 11 {
		t.Errorf("stock %d, want 11", s)
	}
}

// TestIdempotencyReorderedJSONIsTheSameRequest: member order and whitespace
// do not change the fingerprint, so a retry that serialises its body
// differently still replays (EXT.IDEMPOTENCY.KEY.001: canonical form).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyReorderedJSONIsTheSameRequest(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	first := e.Do("POST", adjustPath(id), e.Staff.Token, `{"delta":4,"reason":"recount"}`, "Idempotency-Key", "k-order")
	wantFresh(t, "first", first, http.StatusCreated)
	again := e.Do("POST", adjustPath(id), e.Staff.Token, "{\n  \"reason\" : \"recount\",\t\"delta\": 4 }\n", "Idempotency-Key", "k-order")
	wantReplay(t, "reordered retry", again, first)
}

// TestIdempotencyKeyScopedToActor: two actors using the same key hold two
// independent keys (EXT.IDEMPOTENCY.KEY.001: scope is actor, operation, key).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyKeyScopedToActor(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	other := e.NewStaff()
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	wantFresh(t, "staff 1", adjust(e, e.Staff.Token, id, 1, "shared"), http.StatusCreated)
	wantFresh(t, "staff 2, same key and body", adjust(e, other.Token, id, 1, "shared"), http.StatusCreated)
	if s := stockOf(e, id); s != 12 {
		t.Errorf("stock %d, want 12: each actor's request applies once", s)
	}
}

// TestIdempotencyKeyScopedToOperation: the same key on two operations is two
// independent keys (EXT.IDEMPOTENCY.KEY.001).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyKeyScopedToOperation(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	wantFresh(t, "adjustStock", adjust(e, e.Staff.Token, id, 1, "op-key"), http.StatusCreated)
	created := e.Do("POST", "/v1/products", e.Staff.Token,
		map[string]any{"sku": "OP-KEY", "name": "Op key", "price_cents": 1, "stock": 0}, "Idempotency-Key", "op-key")
	wantFresh(t, "createProduct with the same key", created, http.StatusCreated)
	patched := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"name": "renamed"},
		"If-Match", `"v1"`, "Idempotency-Key", "op-key")
	wantFresh(t, "updateProduct with the same key", patched, http.StatusOK)
}

// TestIdempotencyBareAndQuotedKeyAreOneKey: `abc` and the structured-field
// string `"abc"` name the same key, escapes included.
func TestIdempotencyBareAndQuotedKeyAreOneKey(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	first := adjust(e, e.Staff.Token, id, 1, "abc")
	wantFresh(t, "bare", first, http.StatusCreated)
	wantReplay(t, "quoted", adjust(e, e.Staff.Token, id, 1, `"abc"`), first)

	esc := adjust(e, e.Staff.Token, id, 1, `a"b\c`)
	wantFresh(t, `bare a"b\c`, esc, http.StatusCreated)
	wantReplay(t, `sf-string "a\"b\\c"`, adjust(e, e.Staff.Token, id, 1, `"a\"b\\c"`), esc)
	if s := stockOf(e, id); s != 12 {
		t.Errorf("stock %d, want 12", s)
	}
}

// TestIdempotencyKeyHeaderRules: a key is required where the contract says
// so, and must be 1 to 255 printable ASCII characters.
func TestIdempotencyKeyHeaderRules(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	if r := e.Do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 1, "reason": "x"}); r.Status != http.StatusBadRequest || r.Code() != "idempotency_key_required" {
		t.Errorf("no key on adjustStock: %d %s, want 400 idempotency_key_required", r.Status, r.Body)
	}
	for _, bad := range []string{strings.Repeat("k", 256), `"unterminated`, `""`, "tab\there", "é"} {
		if r := adjust(e, e.Staff.Token, id, 1, bad); r.Status != http.StatusBadRequest || r.Code() != "invalid_idempotency_key" {
			t.Errorf("key %q: %d %s, want 400 invalid_idempotency_key", bad, r.Status, r.Body)
		}
	}
	wantFresh(t, "255 characters", adjust(e, e.Staff.Token, id, 1, strings.Repeat("k", 255)), http.StatusCreated)
	if s := stockOf(e, id); s != 11 {
		t.Errorf("stock %d, want 11: only the valid key applied", s)
	}
}

// TestIdempotencyRejectionStoresNothing: a 4xx outcome is not stored, so the
// retry runs again and can succeed (EXT.IDEMPOTENCY.OUTCOME.001: only 2xx
// outcomes are replayed).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyRejectionStoresNothing(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	r := adjust(e, e.Staff.Token, id, -15, "take-15")
	if r.Status != http.StatusConflict || r.Code() != "insufficient_stock" {
		t.Fatalf("take 15 of 10: %d %s, want 409 insufficient_stock", r.Status, r.Body)
	}
	if n := keyRows(e); n != 0 {
		t.Fatalf("%d idempotency records after a rejection, want 0", n)
	}
	wantFresh(t, "restock", adjust(e, e.Staff.Token, id, 10, "restock"), http.StatusCreated)
	retry := adjust(e, e.Staff.Token, id, -15, "take-15")
	wantFresh(t, "retry after the restock", retry, http.StatusCreated)
	if got := retry.Int("stock"); got != 5 {
		t.Errorf("stock after the retry %d, want 5", got)
	}
}

// TestIdempotencyExpiredRecordFreesKey: after expires_at the key is free
// again, for the same request and for another (EXT.IDEMPOTENCY.RETENTION.001).
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyExpiredRecordFreesKey(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	first := adjust(e, e.Staff.Token, id, 1, "old")
	wantFresh(t, "first", first, http.StatusCreated)
	wantReplay(t, "before expiry", adjust(e, e.Staff.Token, id, 1, "old"), first)

	e.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
	wantFresh(t, "same request after expiry", adjust(e, e.Staff.Token, id, 1, "old"), http.StatusCreated)

	e.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
	wantFresh(t, "other request after expiry", adjust(e, e.Staff.Token, id, 5, "old"), http.StatusCreated)
	if s := stockOf(e, id); s != 17 {
		t.Errorf("stock %d, want 17", s)
	}
	if n := keyRows(e); n != 1 {
		t.Errorf("%d idempotency records, want the one taken over", n)
	}
}

// TestIdempotencyReplayCarriesStoredHeaders: a replay returns the original
// status, body, Location, ETag and Content-Type, plus Idempotent-Replayed,
// and nothing of the caller's credentials (EXT.IDEMPOTENCY.REPLAY.001,
// OUTCOME.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestIdempotencyReplayCarriesStoredHeaders(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	body := map[string]any{"sku": "REPLAY-1", "name": "Replayed", "price_cents": 250, "stock": 3}
	first := e.Do("POST", "/v1/products", e.Staff.Token, body, "Idempotency-Key", "create-replay-1")
	wantFresh(t, "create", first, http.StatusCreated)
	again := e.Do("POST", "/v1/products", e.Staff.Token, body, "Idempotency-Key", "create-replay-1")
	wantReplay(t, "create again", again, first)
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if got, want := again.Header.Get(h), first.Header.Get(h); got != want || got == "" {
			t.Errorf("replayed %s = %q, original %q", h, got, want)
		}
	}
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the original carries Idempotent-Replayed")
	}
	if n := e.QueryInt(`SELECT count(*) FROM products WHERE sku = 'REPLAY-1'`); n != 1 {
		t.Errorf("%d products, want 1", n)
	}
	var stored string
	if err := e.Pool.QueryRow(t.Context(), `SELECT response_headers::text || convert_from(response_body, 'UTF8') FROM idempotency_keys`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, e.Staff.Token) || strings.Contains(strings.ToLower(stored), "authorization") {
		t.Errorf("the stored record holds credentials: %s", stored)
	}
}

// TestIdempotencyKeyCheckedBeforeIfMatch: a retried PATCH whose first answer
// was lost replays its 200 instead of a 409 against its own success.
func TestIdempotencyKeyCheckedBeforeIfMatch(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	first := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"price_cents": 120}, "If-Match", `"v1"`, "Idempotency-Key", "reprice")
	wantFresh(t, "PATCH", first, http.StatusOK)
	again := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"price_cents": 120}, "If-Match", `"v1"`, "Idempotency-Key", "reprice")
	wantReplay(t, "PATCH retried with the old ETag", again, first)
	if again.Header.Get("ETag") != `"v2"` {
		t.Errorf("replayed ETag %q, want \"v2\"", again.Header.Get("ETag"))
	}
	stale := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"price_cents": 120}, "If-Match", `"v1"`)
	if stale.Status != http.StatusConflict || stale.Code() != "version_conflict" {
		t.Errorf("same PATCH without the key: %d %s, want 409 version_conflict", stale.Status, stale.Body)
	}
}

// TestKeyIsCheckedBeforeThePrecondition: the contract checks the key before
// If-Match. A request whose If-Match is missing or unreadable, under the key
// of a completed request, answers for that request: 422
// idempotency_key_reused, since its fingerprint (which holds the If-Match
// versions) is another; under a key that holds nothing it is refused (428,
// 400), stores nothing, and the same key then serves the mended request.
// Without a key the refusal needs no database.
// Patterns and rule ids: docs/patterns.md (EXT.IDEMPOTENCY.KEY.001).
func TestKeyIsCheckedBeforeThePrecondition(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	path := "/v1/products/" + id
	patch := map[string]any{"price_cents": 150}
	first := e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", `"v1"`, "Idempotency-Key", "k-patch")
	wantFresh(t, "first", first, http.StatusOK)
	wantReplay(t, "the retry, with its If-Match", e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", `"v1"`, "Idempotency-Key", "k-patch"), first)
	for _, c := range []struct {
		what    string
		ifMatch []string
	}{
		{"without If-Match", nil},
		{"with If-Match: *", []string{"If-Match", "*"}},
		{"with an unquoted tag", []string{"If-Match", "v1"}},
	} {
		r := e.Do("PATCH", path, e.Staff.Token, patch, append(c.ifMatch, "Idempotency-Key", "k-patch")...)
		if r.Status != http.StatusUnprocessableEntity || r.Code() != "idempotency_key_reused" {
			t.Errorf("the completed request's key, %s: %d %s, want 422 idempotency_key_reused", c.what, r.Status, r.Body)
		}
	}
	stored := keyRows(e)
	if r := e.Do("PATCH", path, e.Staff.Token, patch, "Idempotency-Key", "k-fresh"); r.Status != http.StatusPreconditionRequired || r.Code() != "precondition_required" {
		t.Fatalf("a fresh key without If-Match: %d %s, want 428 precondition_required", r.Status, r.Body)
	}
	if r := e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", "v2", "Idempotency-Key", "k-fresh"); r.Status != http.StatusBadRequest || r.Code() != "malformed_request" {
		t.Fatalf("a fresh key with an unquoted tag: %d %s, want 400 malformed_request", r.Status, r.Body)
	}
	if n := keyRows(e); n != stored {
		t.Fatalf("%d key records after the refusals, want %d: a refusal stores nothing", n, stored)
	}
	wantFresh(t, "the fresh key, mended", e.Do("PATCH", path, e.Staff.Token, map[string]any{"price_cents": 175}, "If-Match", `"v2"`, "Idempotency-Key", "k-fresh"), http.StatusOK)
}
