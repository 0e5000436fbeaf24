package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// wantProblem fails unless r is a Problem Details answer with status and code.
func wantProblem(t *testing.T, what string, r *httpkit.Response, status int, code string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	if r.Status != status || r.Code() != code {
		t.Errorf("%s: %d %s, want %d %s", what, r.Status, r.Body, status, code)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	for _, m := range []string{"type", "title", "detail"} {
		if r.String(m) == "" {
			t.Errorf("%s: problem member %q missing in %s", what, m, r.Body)
		}
	}
	if r.Int("status") != int64(status) {
		t.Errorf("%s: problem status %d, HTTP status %d", what, r.Int("status"), status)
	}
}

// fieldsOf returns the field paths of a validation problem.
func fieldsOf(r *httpkit.Response) []string {
	var out []string
	errs, _ := r.JSON["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		f, _ := m["field"].(string)
		out = append(out, f)
	}
	return out
}

// raw sends a request with no helper conveniences: exact headers, raw body.
func raw(t *testing.T, e *httpkit.Env, method, path string, body []byte, header http.Header) *httpkit.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.Server.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	res, err := e.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &httpkit.Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// TestContractAuthentication: a /v1 call without a valid bearer token is 401
// unauthenticated with WWW-Authenticate: Bearer, and a deactivated actor's
// token stops working at once.
func TestContractAuthentication(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	cases := []struct{ name, auth string }{
		{"missing", ""},
		{"unknown token", "Bearer osk_not-a-token"},
		{"other scheme", "Basic dXNlcjpwYXNz"},
		{"empty bearer", "Bearer "},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.auth != "" {
			h.Set("Authorization", c.auth)
		}
		r := raw(t, e, "GET", "/v1/products", nil, h)
		r.JSON = decodeJSON(r.Body)
		wantProblem(t, c.name, r, http.StatusUnauthorized, "unauthenticated")
		if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q, want Bearer", c.name, r.Header.Get("WWW-Authenticate"))
		}
	}

	customer := e.NewCustomer(0)
	if r := e.Do("GET", "/v1/products", customer.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("active customer: %d %s", r.Status, r.Body)
	}
	if r := e.Do("POST", "/v1/actors/"+customer.ID+"/deactivate", e.Staff.Token, nil); r.Status != http.StatusOK || r.JSON["active"] != false {
		t.Fatalf("deactivate: %d %s", r.Status, r.Body)
	}
	wantProblem(t, "deactivated actor", e.Do("GET", "/v1/products", customer.Token, nil), http.StatusUnauthorized, "unauthenticated")
}

// TestContractForbiddenRoles: a role that may not call an operation gets 403
// forbidden, and nothing changes.
func TestContractForbiddenRoles(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	customer := e.NewCustomer(1_000_00)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	wantProblem(t, "customer creates a product", e.Do("POST", "/v1/products", customer.Token,
		map[string]any{"sku": "NOPE", "name": "x", "price_cents": 1, "stock": 1}), http.StatusForbidden, "forbidden")
	wantProblem(t, "customer adjusts stock", e.Do("POST", adjustPath(id), customer.Token,
		map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "c1"), http.StatusForbidden, "forbidden")
	wantProblem(t, "customer patches a product", e.Do("PATCH", "/v1/products/"+id, customer.Token,
		map[string]any{"name": "y"}, "If-Match", `"v1"`), http.StatusForbidden, "forbidden")
	wantProblem(t, "customer deactivates staff", e.Do("POST", "/v1/actors/"+e.Staff.ID+"/deactivate", customer.Token, nil),
		http.StatusForbidden, "forbidden")
	wantProblem(t, "staff places an order", e.Do("POST", "/v1/orders", e.Staff.Token,
		map[string]any{"lines": []any{map[string]any{"product_id": id, "quantity": 1}}}, "Idempotency-Key", "s1"),
		http.StatusForbidden, "forbidden")
	// The role is refused first: a caller who may not call the operation is
	// not told to add a key, a precondition or a valid body first.
	wantProblem(t, "customer adjusts stock without a key", e.Do("POST", adjustPath(id), customer.Token,
		map[string]any{"delta": 1, "reason": "x"}), http.StatusForbidden, "forbidden")
	wantProblem(t, "customer patches a product without If-Match", e.Do("PATCH", "/v1/products/"+id, customer.Token,
		map[string]any{"name": "y"}), http.StatusForbidden, "forbidden")
	wantProblem(t, "customer ships without If-Match", e.Do("POST", "/v1/orders/"+uuid.NewString()+"/ship", customer.Token, nil),
		http.StatusForbidden, "forbidden")
	wantProblem(t, "staff places an order without a key, with a bad body", e.Do("POST", "/v1/orders", e.Staff.Token,
		map[string]any{"nope": 1}), http.StatusForbidden, "forbidden")
	if n := e.QueryInt(`SELECT count(*) FROM products`); n != 1 {
		t.Errorf("%d products, want 1", n)
	}
	if s := stockOf(e, id); s != 10 {
		t.Errorf("stock %d, want 10", s)
	}
}

// TestContractNotFoundAndMethodNotAllowed: unknown routes and resources are
// 404 problems, a known route with another method is a 405 problem, and a
// customer cannot tell another customer's order from a missing one.
func TestContractNotFoundAndMethodNotAllowed(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	wantProblem(t, "unknown route", e.Do("GET", "/nope", "", nil), http.StatusNotFound, "not_found")
	wantProblem(t, "unknown /v1 route", e.Do("GET", "/v1/nope", e.Staff.Token, nil), http.StatusNotFound, "not_found")
	wantProblem(t, "unknown product", e.Do("GET", "/v1/products/"+uuid.NewString(), e.Staff.Token, nil), http.StatusNotFound, "not_found")
	wantProblem(t, "product id not a UUID", e.Do("GET", "/v1/products/42", e.Staff.Token, nil), http.StatusNotFound, "not_found")
	wantProblem(t, "unknown order", e.Do("GET", "/v1/orders/"+uuid.NewString(), e.Staff.Token, nil), http.StatusNotFound, "not_found")
	wantProblem(t, "adjust unknown product", e.Do("POST", adjustPath(uuid.NewString()), e.Staff.Token,
		map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "k"), http.StatusNotFound, "not_found")
	wantProblem(t, "deactivate unknown actor", e.Do("POST", "/v1/actors/"+uuid.NewString()+"/deactivate", e.Staff.Token, nil),
		http.StatusNotFound, "not_found")
	wantProblem(t, "DELETE a product", e.Do("DELETE", "/v1/products/"+uuid.NewString(), e.Staff.Token, nil),
		http.StatusMethodNotAllowed, "method_not_allowed")
	wantProblem(t, "PUT /v1/products", e.Do("PUT", "/v1/products", e.Staff.Token, nil), http.StatusMethodNotAllowed, "method_not_allowed")
	wantProblem(t, "POST /healthz", e.Do("POST", "/healthz", "", nil), http.StatusMethodNotAllowed, "method_not_allowed")
	// What a 405 says the route allows (RFC 9110 §15.5.6), for every route:
	// TestContractOfEveryOperation.

	alice, bob := e.NewCustomer(1_000_00), e.NewCustomer(1_000_00)
	pid := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	order := e.Do("POST", "/v1/orders", alice.Token, map[string]any{"lines": []any{map[string]any{"product_id": pid, "quantity": 1}}},
		"Idempotency-Key", "alice-1")
	if order.Status != http.StatusCreated {
		t.Fatalf("place order: %d %s", order.Status, order.Body)
	}
	oid := order.String("id")
	wantProblem(t, "bob reads alice's order", e.Do("GET", "/v1/orders/"+oid, bob.Token, nil), http.StatusNotFound, "not_found")
	wantProblem(t, "bob cancels alice's order", e.Do("POST", "/v1/orders/"+oid+"/cancel", bob.Token, nil, "If-Match", `"v1"`),
		http.StatusNotFound, "not_found")
	wantProblem(t, "bob pays alice's order", e.Do("POST", "/v1/orders/"+oid+"/payments", bob.Token,
		map[string]any{"amount_cents": 1}, "Idempotency-Key", "bob-pays"), http.StatusNotFound, "not_found")
	if list := e.Do("GET", "/v1/orders", bob.Token, nil); list.Status != http.StatusOK || len(list.JSON["items"].([]any)) != 0 {
		t.Errorf("bob's order list: %d %s, want no items", list.Status, list.Body)
	}
}

// TestContractBodyRules: bodies are judged strictly: too large is 413,
// unparsable or unknown members are 400, broken field rules are 422 with
// the path of every broken field.
func TestContractBodyRules(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})

	big := `{"sku":"BIG","name":"` + strings.Repeat("x", 1<<20) + `","price_cents":1,"stock":1}`
	wantProblem(t, "body over 1 MiB", e.Do("POST", "/v1/products", e.Staff.Token, big), http.StatusRequestEntityTooLarge, "payload_too_large")

	malformed := map[string]string{
		"unknown member":  `{"sku":"A","name":"a","price_cents":1,"stock":1,"colour":"red"}`,
		"not JSON":        `sku=A&name=a`,
		"trailing junk":   `{"sku":"A","name":"a","price_cents":1,"stock":1} {}`,
		"trailing text":   `{"sku":"A","name":"a","price_cents":1,"stock":1}xyz`,
		"truncated":       `{"sku":"A","name":`,
		"array":           `[1,2]`,
		"empty":           ``,
		"string":          `"hello"`,
		"duplicate value": `{"sku":"A"}{"sku":"B"}`,
	}
	for name, body := range malformed {
		wantProblem(t, name, e.Do("POST", "/v1/products", e.Staff.Token, body), http.StatusBadRequest, "malformed_request")
	}
	wantProblem(t, "cancel with a body", e.Do("POST", "/v1/orders/"+uuid.NewString()+"/cancel", e.Staff.Token, `{"why":"x"}`,
		"If-Match", `"v1"`), http.StatusBadRequest, "malformed_request")

	fieldCases := []struct {
		name, method, path string
		body               any
		headers            []string
		fields             []string
	}{
		{"every product field broken", "POST", "/v1/products",
			map[string]any{"sku": "has space", "name": "", "price_cents": -1, "stock": -5}, nil,
			[]string{"sku", "name", "price_cents", "stock"}},
		{"product fields missing", "POST", "/v1/products", map[string]any{}, nil,
			[]string{"sku", "name", "price_cents"}},
		{"wrong JSON type", "POST", "/v1/products",
			map[string]any{"sku": "A", "name": "a", "price_cents": "ten", "stock": 1}, nil, []string{"price_cents"}},
		{"fractional number", "POST", adjustPath(id), map[string]any{"delta": 1.5, "reason": "x"},
			[]string{"Idempotency-Key", "f1"}, []string{"delta"}},
		{"zero delta", "POST", adjustPath(id), map[string]any{"delta": 0, "reason": ""},
			[]string{"Idempotency-Key", "f2"}, []string{"delta", "reason"}},
		{"order lines", "POST", "/v1/orders", map[string]any{"lines": []any{
			map[string]any{"product_id": id, "quantity": 0},
			map[string]any{"product_id": id, "quantity": 1},
			map[string]any{"product_id": "nope", "quantity": 1001},
		}}, []string{"Idempotency-Key", "f3"},
			[]string{"lines[0].quantity", "lines[1].product_id", "lines[2].product_id", "lines[2].quantity"}},
		{"no lines", "POST", "/v1/orders", map[string]any{"lines": []any{}}, []string{"Idempotency-Key", "f4"}, []string{"lines"}},
		{"empty patch", "PATCH", "/v1/products/" + id, map[string]any{}, []string{"If-Match", `"v1"`}, []string{"name", "price_cents"}},
		{"payment of zero", "POST", "/v1/orders/" + uuid.NewString() + "/payments", map[string]any{"amount_cents": 0},
			[]string{"Idempotency-Key", "f5"}, []string{"amount_cents"}},
		{"limit", "GET", "/v1/products?limit=0", nil, nil, []string{"limit"}},
	}
	customer := e.NewCustomer(1_000_00)
	for _, c := range fieldCases {
		token := e.Staff.Token
		if c.path == "/v1/orders" {
			token = customer.Token
		}
		r := e.Do(c.method, c.path, token, c.body, c.headers...)
		wantProblem(t, c.name, r, http.StatusUnprocessableEntity, "validation_failed")
		if got := fieldsOf(r); !slices.Equal(got, c.fields) {
			t.Errorf("%s: error fields %q, want %q", c.name, got, c.fields)
		}
	}
}

// TestContractSKUTaken: a second product with a taken SKU is 409 sku_taken.
func TestContractSKUTaken(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	body := map[string]any{"sku": "MUG-1", "name": "Mug", "price_cents": 900, "stock": 1}
	if r := e.Do("POST", "/v1/products", e.Staff.Token, body); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	body["name"] = "Another mug"
	wantProblem(t, "same SKU", e.Do("POST", "/v1/products", e.Staff.Token, body, "Idempotency-Key", "mug-2"), http.StatusConflict, "sku_taken")
	if n := keyRows(e); n != 0 {
		t.Errorf("%d idempotency records after sku_taken, want 0", n)
	}
}

// TestContractConditionalRequests: GET honours If-None-Match (strong and
// weak), and a write that needs If-Match is 428 without it, 409 with any tag
// that is not the current strong one, 400 with a value that holds no entity
// tag (TestContractIfMatchForms has the lists), and applies with the current one
// (EXT.CONCURRENCY.VERSION.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestContractConditionalRequests(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	path := "/v1/products/" + id

	get := e.Do("GET", path, e.Staff.Token, nil)
	if get.Status != http.StatusOK || get.Header.Get("ETag") != `"v1"` {
		t.Fatalf("GET: %d ETag %q", get.Status, get.Header.Get("ETag"))
	}
	for _, inm := range []string{`"v1"`, `W/"v1"`, `"v9", "v1"`, `*`} {
		r := e.Do("GET", path, e.Staff.Token, nil, "If-None-Match", inm)
		if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != `"v1"` {
			t.Errorf("If-None-Match %s: %d %q ETag %q, want 304 with no body", inm, r.Status, r.Body, r.Header.Get("ETag"))
		}
	}
	if r := e.Do("GET", path, e.Staff.Token, nil, "If-None-Match", `"v2"`); r.Status != http.StatusOK {
		t.Errorf("If-None-Match stale: %d, want 200", r.Status)
	}

	patch := map[string]any{"name": "Renamed"}
	wantProblem(t, "no If-Match", e.Do("PATCH", path, e.Staff.Token, patch), http.StatusPreconditionRequired, "precondition_required")
	wantProblem(t, "If-Match *", e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", "*"), http.StatusPreconditionRequired, "precondition_required")
	for _, im := range []string{`"v0"`, `"v2"`, `W/"v1"`, `"x1"`, `"v-1"`} {
		wantProblem(t, "If-Match "+im, e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", im), http.StatusConflict, "version_conflict")
	}
	for _, im := range []string{`v1`, `garbage`} { // no entity tag at all
		wantProblem(t, "If-Match "+im, e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", im), http.StatusBadRequest, "malformed_request")
	}
	if v := e.QueryInt(`SELECT version FROM products WHERE id = $1`, id); v != 1 {
		t.Fatalf("version %d after refused writes, want 1", v)
	}
	ok := e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", `"v1"`)
	if ok.Status != http.StatusOK || ok.Header.Get("ETag") != `"v2"` || ok.String("name") != "Renamed" {
		t.Fatalf("PATCH with the current tag: %d ETag %q %s", ok.Status, ok.Header.Get("ETag"), ok.Body)
	}
	if _, has := ok.JSON["version"]; has {
		t.Errorf("the body carries a version: %s", ok.Body)
	}
	wantProblem(t, "old tag after the change", e.Do("PATCH", path, e.Staff.Token, patch, "If-Match", `"v1"`), http.StatusConflict, "version_conflict")

	customer := e.NewCustomer(1_000_00)
	order := e.Do("POST", "/v1/orders", customer.Token, map[string]any{"lines": []any{map[string]any{"product_id": id, "quantity": 1}}},
		"Idempotency-Key", "o1")
	oid := order.String("id")
	wantProblem(t, "cancel without If-Match", e.Do("POST", "/v1/orders/"+oid+"/cancel", customer.Token, nil), http.StatusPreconditionRequired, "precondition_required")
	wantProblem(t, "ship with a weak tag", e.Do("POST", "/v1/orders/"+oid+"/ship", e.Staff.Token, nil, "If-Match", `W/"v1"`), http.StatusConflict, "version_conflict")
	if r := e.Do("GET", "/v1/orders/"+oid, customer.Token, nil, "If-None-Match", order.Header.Get("ETag")); r.Status != http.StatusNotModified {
		t.Errorf("order If-None-Match: %d, want 304", r.Status)
	}
}

// TestContractPagination: limit is 1 to 100, the cursor is opaque and
// checked, and walking the pages returns every product once, newest first,
// ending with a null next_cursor.
func TestContractPagination(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	var created []string
	for range 7 {
		created = append(created, e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1}))
	}
	slices.Reverse(created) // newest first

	for _, q := range []string{"limit=0", "limit=101", "limit=-1", "limit=abc", "limit=1.5"} {
		r := e.Do("GET", "/v1/products?"+q, e.Staff.Token, nil)
		wantProblem(t, q, r, http.StatusUnprocessableEntity, "validation_failed")
		if f := fieldsOf(r); !slices.Equal(f, []string{"limit"}) {
			t.Errorf("%s: fields %q", q, f)
		}
	}
	for _, c := range []string{"xyz", "AAAA", uuid.NewString()} {
		r := e.Do("GET", "/v1/products?cursor="+c, e.Staff.Token, nil)
		wantProblem(t, "cursor "+c, r, http.StatusUnprocessableEntity, "validation_failed")
	}
	for _, q := range []string{"limit=1", "limit=100", ""} {
		if r := e.Do("GET", "/v1/products?"+q, e.Staff.Token, nil); r.Status != http.StatusOK {
			t.Errorf("%q: %d %s", q, r.Status, r.Body)
		}
	}

	var seen []string
	cursor, pages := "", 0
	for {
		path := "/v1/products?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.Do("GET", path, e.Staff.Token, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.Status, r.Body)
		}
		pages++
		for _, it := range r.JSON["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		next, present := r.JSON["next_cursor"]
		if !present {
			t.Fatalf("page %d has no next_cursor member: %s", pages, r.Body)
		}
		if next == nil {
			break
		}
		cursor = next.(string)
		if pages > 10 {
			t.Fatal("the walk does not end")
		}
	}
	if !slices.Equal(seen, created) {
		t.Errorf("walk returned %v, want %v (every product once, newest first)", seen, created)
	}
	if pages != 3 {
		t.Errorf("%d pages of 3 for 7 products, want 3", pages)
	}
	if r := e.Do("GET", "/v1/products?limit=7", e.Staff.Token, nil); r.JSON["next_cursor"] != nil {
		t.Errorf("an exactly full last page has a next_cursor: %s", r.Body)
	}
}

// tableDigest returns a digest of every row of every table of the service's
// schema (every table but goose's own), so a table added by a migration is
// covered without being named here.
func tableDigest(t *testing.T, e *httpkit.Env) map[string]string {
	t.Helper()
	ctx := t.Context()
	rows, err := e.Pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version' ORDER BY 1`)
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	if len(tables) == 0 {
		t.Fatal("the schema has no tables")
	}
	out := map[string]string{}
	for _, tbl := range tables {
		var d string
		q := fmt.Sprintf(`SELECT count(*)::text || ':' || COALESCE(md5(string_agg(x::text, '|' ORDER BY x::text)), '') FROM %s x`, pgx.Identifier{tbl}.Sanitize())
		if err := e.Pool.QueryRow(ctx, q).Scan(&d); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out[tbl] = d
	}
	return out
}

// TestContractRejectionsLeaveNoTrace: every rejected write, keyed or not,
// leaves every table exactly as it was: no half-written order, no stored
// key, no moved stock, no event.
func TestContractRejectionsLeaveNoTrace(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	customer := e.NewCustomer(500)
	plenty, scarce := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 100}), e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1})
	placed := e.Do("POST", "/v1/orders", customer.Token, map[string]any{"lines": []any{map[string]any{"product_id": plenty, "quantity": 2}}},
		"Idempotency-Key", "setup-order")
	if placed.Status != http.StatusCreated {
		t.Fatalf("setup order: %d %s", placed.Status, placed.Body)
	}
	oid := placed.String("id")
	if r := e.Do("POST", "/v1/orders/"+oid+"/payments", customer.Token, map[string]any{"amount_cents": 50}, "Idempotency-Key", "setup-pay"); r.Status != http.StatusCreated {
		t.Fatalf("setup payment: %d %s", r.Status, r.Body)
	}
	if r := e.Do("POST", "/v1/products", e.Staff.Token, map[string]any{"sku": "TAKEN", "name": "x", "price_cents": 1, "stock": 1}); r.Status != http.StatusCreated {
		t.Fatalf("setup product: %d %s", r.Status, r.Body)
	}
	// A sale leaves the product's version alone: an edit makes "v1" stale.
	if r := e.Do("PATCH", "/v1/products/"+plenty, e.Staff.Token, map[string]any{"name": "Plenty"}, "If-Match", `"v1"`); r.Status != http.StatusOK {
		t.Fatalf("setup edit: %d %s", r.Status, r.Body)
	}
	before := tableDigest(t, e)

	line := func(id string, q int) map[string]any { return map[string]any{"product_id": id, "quantity": q} }
	rejected := []struct {
		name, token, method, path string
		body                      any
		headers                   []string
		code                      string
	}{
		{"one short line takes nothing", customer.Token, "POST", "/v1/orders",
			map[string]any{"lines": []any{line(plenty, 5), line(scarce, 2)}}, []string{"Idempotency-Key", "r1"}, "insufficient_stock"},
		{"over the credit limit", customer.Token, "POST", "/v1/orders",
			map[string]any{"lines": []any{line(plenty, 4)}}, []string{"Idempotency-Key", "r2"}, "credit_limit_exceeded"},
		{"unknown product", customer.Token, "POST", "/v1/orders",
			map[string]any{"lines": []any{line(plenty, 1), line(uuid.NewString(), 1)}}, []string{"Idempotency-Key", "r3"}, "validation_failed"},
		{"overpayment", customer.Token, "POST", "/v1/orders/" + oid + "/payments",
			map[string]any{"amount_cents": 151}, []string{"Idempotency-Key", "r4"}, "overpayment"},
		{"cancel at a stale version", customer.Token, "POST", "/v1/orders/" + oid + "/cancel", nil,
			[]string{"If-Match", `"v1"`, "Idempotency-Key", "r11"}, "version_conflict"},
		{"withdraw too much", e.Staff.Token, "POST", adjustPath(scarce),
			map[string]any{"delta": -2, "reason": "x"}, []string{"Idempotency-Key", "r6"}, "insufficient_stock"},
		{"stale PATCH", e.Staff.Token, "PATCH", "/v1/products/" + plenty,
			map[string]any{"price_cents": 1}, []string{"If-Match", `"v1"`, "Idempotency-Key", "r7"}, "version_conflict"},
		{"taken SKU", e.Staff.Token, "POST", "/v1/products",
			map[string]any{"sku": "TAKEN", "name": "x", "price_cents": 1, "stock": 1}, []string{"Idempotency-Key", "r8"}, "sku_taken"},
		{"unknown member", e.Staff.Token, "POST", "/v1/products",
			map[string]any{"sku": "NEW", "name": "x", "price_cents": 1, "stock": 1, "extra": 1}, []string{"Idempotency-Key", "r10"}, "malformed_request"},
		{"last staff", e.Staff.Token, "POST", "/v1/actors/" + e.Staff.ID + "/deactivate", nil,
			[]string{"Idempotency-Key", "r9"}, "last_staff"},
	}
	for _, c := range rejected {
		r := e.Do(c.method, c.path, c.token, c.body, c.headers...)
		if r.Status < 400 || r.Status >= 500 || r.Code() != c.code {
			t.Errorf("%s: %d %s, want %s", c.name, r.Status, r.Body, c.code)
		}
	}
	after := tableDigest(t, e)
	for tbl, d := range before {
		if after[tbl] != d {
			t.Errorf("table %s changed after rejected requests (%s -> %s)", tbl, d, after[tbl])
		}
	}
}

// decodeJSON decodes a JSON object body, or returns nil.
func decodeJSON(b []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// TestContractOperationalEndpoints: /healthz, /livez, /readyz, /metrics and
// /openapi.yaml answer without authentication, every response carries
// X-Request-Id, and the metrics count requests, replays and version conflicts.
func TestContractOperationalEndpoints(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		r := e.Do("GET", p, "", nil)
		if r.Status != http.StatusOK || string(r.Body) != "ok\n" || r.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d %q X-Request-Id %q", p, r.Status, r.Body, r.Header.Get("X-Request-Id"))
		}
	}
	doc := e.Do("GET", "/openapi.yaml", "", nil)
	if doc.Status != http.StatusOK || !strings.HasPrefix(string(doc.Body), "openapi: 3.1") || doc.Header.Get("Content-Type") != "application/yaml" {
		t.Errorf("/openapi.yaml: %d %q %.20q", doc.Status, doc.Header.Get("Content-Type"), doc.Body)
	}
	if r := e.Do("GET", "/healthz", "", nil, "X-Request-Id", "trace-me-42"); r.Header.Get("X-Request-Id") != "trace-me-42" {
		t.Errorf("caller's X-Request-Id not echoed: %q", r.Header.Get("X-Request-Id"))
	}
	if r := e.Do("GET", "/v1/products/"+uuid.NewString(), e.Staff.Token, nil, "X-Request-Id", "trace-me-43"); r.String("request_id") != "trace-me-43" {
		t.Errorf("problem request_id %q, want the caller's", r.String("request_id"))
	}

	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	adjust(e, e.Staff.Token, id, 1, "m1")
	if r := adjust(e, e.Staff.Token, id, 1, "m1"); !replayed(r) {
		t.Fatalf("no replay: %d %s", r.Status, r.Body)
	}
	e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"name": "x"}, "If-Match", `"v1"`)
	e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"name": "y"}, "If-Match", `"v1"`)

	m := e.Do("GET", "/metrics", "", nil)
	if m.Status != http.StatusOK || !strings.HasPrefix(m.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %q", m.Status, m.Header.Get("Content-Type"))
	}
	text := string(m.Body)
	for _, want := range []string{
		`ordersvc_http_requests_total{method="POST",route="/v1/products/{id}/stock-adjustments",status="201"} 2`,
		`ordersvc_idempotency_replays_total{operation="adjustStock"} 1`,
		`ordersvc_version_conflicts_total{route="/v1/products/{id}"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
