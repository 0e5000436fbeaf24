package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// Strict input (ADR 0010): what a hostile or careless caller sends is
// refused with a 4xx and a stable code, never a 500, and leaves no trace.

// staffJSON sends a raw JSON body as staff, with extra headers as pairs.
func staffJSON(t *testing.T, e *httpkit.Env, method, path, body string, headers ...string) *httpkit.Response {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+e.Staff.Token)
	h.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		h.Add(headers[i], headers[i+1])
	}
	r := raw(t, e, method, path, []byte(body), h)
	r.JSON = decodeJSON(r.Body)
	return r
}

// TestContractControlCharactersAre422: a U+0000 or another control character
// in a product name or an adjustment reason is 422 validation_failed naming
// the field (PostgreSQL itself refuses U+0000 in text with SQLSTATE 22021,
// which used to surface as a 500), and nothing is written.
func TestContractControlCharactersAre422(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	events := e.QueryInt(`SELECT count(*) FROM outbox_events`)
	cases := []struct {
		name, method, path, body, field string
		headers                         []string
	}{
		{"NUL in a new product's name", "POST", "/v1/products", `{"sku":"NUL-1","name":"mug\u0000","price_cents":1,"stock":1}`, "name", nil},
		{"escape sequence in a new product's name", "POST", "/v1/products", `{"sku":"ESC-1","name":"\u001b[31mred","price_cents":1,"stock":1}`, "name", nil},
		{"NUL in a patched name", "PATCH", "/v1/products/" + id, `{"name":"\u0000"}`, "name", []string{"If-Match", `"v1"`}},
		{"NUL in an adjustment reason", "POST", adjustPath(id), `{"delta":5,"reason":"recount\u0000"}`, "reason", []string{"Idempotency-Key", "nul-1"}},
		{"line break in an adjustment reason", "POST", adjustPath(id), `{"delta":5,"reason":"a\nb"}`, "reason", []string{"Idempotency-Key", "nul-2"}},
	}
	for _, c := range cases {
		r := staffJSON(t, e, c.method, c.path, c.body, c.headers...)
		wantProblem(t, c.name, r, http.StatusUnprocessableEntity, "validation_failed")
		if got := fieldsOf(r); !slices.Equal(got, []string{c.field}) {
			t.Errorf("%s: fields %q, want [%s]", c.name, got, c.field)
		}
	}
	if n := e.QueryInt(`SELECT count(*) FROM products`); n != 1 {
		t.Errorf("%d products, want 1", n)
	}
	if n := e.QueryInt(`SELECT count(*) FROM stock_adjustments`); n != 0 {
		t.Errorf("%d stock adjustments, want 0", n)
	}
	if v := e.QueryInt(`SELECT version FROM products WHERE id = $1`, id); v != 1 {
		t.Errorf("product at version %d, want 1", v)
	}
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events`); n != events {
		t.Errorf("%d events, want %d", n, events)
	}
}

// TestContractStrictJSON: JSON is read strictly (RFC 8259 §4 leaves
// duplicate members to each parser, so none is guessed): a member named
// twice, at any depth and however it is escaped, and a member name that
// matches only case-insensitively are 400 malformed_request, and nothing
// changes.
func TestContractStrictJSON(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1000})
	customer := e.NewCustomer(1_000_000_00)
	cases := []struct {
		name, path, body, token, detail string
	}{
		{"duplicate member, last would win", adjustPath(id), `{"delta":5,"delta":-500,"reason":"x"}`, e.Staff.Token, `"delta"`},
		{"duplicate through an escape", adjustPath(id), `{"delta":5,"\u0064elta":-500,"reason":"x"}`, e.Staff.Token, `"delta"`},
		{"member in another case", adjustPath(id), `{"Delta":5,"reason":"x"}`, e.Staff.Token, `"Delta"`},
		{"member in upper case", adjustPath(id), `{"delta":5,"REASON":"x"}`, e.Staff.Token, `"REASON"`},
		{"duplicate inside an order line", "/v1/orders", `{"lines":[{"product_id":"` + id + `","quantity":1,"quantity":900}]}`, customer.Token, `"quantity"`},
		{"order line member in another case", "/v1/orders", `{"lines":[{"Product_ID":"` + id + `","quantity":1}]}`, customer.Token, `"Product_ID"`},
		{"duplicate top-level array", "/v1/orders", `{"lines":[],"lines":[{"product_id":"` + id + `","quantity":1}]}`, customer.Token, `"lines"`},
	}
	for i, c := range cases {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+c.token)
		h.Set("Idempotency-Key", "strict-"+string(rune('a'+i)))
		r := raw(t, e, "POST", c.path, []byte(c.body), h)
		r.JSON = decodeJSON(r.Body)
		wantProblem(t, c.name, r, http.StatusBadRequest, "malformed_request")
		if !strings.Contains(r.String("detail"), c.detail) {
			t.Errorf("%s: detail %q does not name %s", c.name, r.String("detail"), c.detail)
		}
	}
	if s := stockOf(e, id); s != 1000 {
		t.Errorf("stock %d, want 1000", s)
	}
	if n := e.QueryInt(`SELECT count(*) FROM orders`); n != 0 {
		t.Errorf("%d orders, want 0", n)
	}
	if n := e.QueryInt(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("%d idempotency records, want 0", n)
	}
	// The exact names still work.
	ok := staffJSON(t, e, "POST", adjustPath(id), `{"delta":5,"reason":"x"}`, "Idempotency-Key", "strict-ok")
	if ok.Status != http.StatusCreated {
		t.Fatalf("exact member names: %d %s", ok.Status, ok.Body)
	}
}

// TestContractIfMatchForms: If-Match lists apply when any strong tag in
// them is current (RFC 9110 §13.1.1), also across several header lines; a
// weak or unknown tag never matches (409); a value that holds no entity tag
// is 400 with a detail that shows the quoted form; "*" and a missing header
// are 428 with a detail that says which (EXT.CONCURRENCY.VERSION.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestContractIfMatchForms(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	path := "/v1/products/" + id
	patch := func(name string, ifMatch ...string) *httpkit.Response {
		var h []string
		for _, v := range ifMatch {
			h = append(h, "If-Match", v)
		}
		return staffJSON(t, e, "PATCH", path, `{"name":"`+name+`"}`, h...)
	}
	// v1 -> v2
	if r := patch("two", `"v1"`); r.Status != http.StatusOK || r.Header.Get("ETag") != `"v2"` {
		t.Fatalf("first patch: %d %s", r.Status, r.Body)
	}

	r := patch("three", `"v1", "v2"`)
	if r.Status != http.StatusOK || r.Header.Get("ETag") != `"v3"` {
		t.Errorf(`If-Match: "v1", "v2" at v2: %d %s, want 200 and ETag "v3"`, r.Status, r.Body)
	}
	r = patch("four", `"v1"`, `W/"v2"`, `"v3"`)
	if r.Status != http.StatusOK || r.Header.Get("ETag") != `"v4"` {
		t.Errorf(`three If-Match lines at v3: %d %s, want 200 and ETag "v4"`, r.Status, r.Body)
	}
	at := e.QueryInt(`SELECT version FROM products WHERE id = $1`, id)

	conflicts := map[string][]string{
		"weak tag of the current version": {`W/"v` + itoa(at) + `"`},
		"stale and unknown tags":          {`"v1", "abc", "v01"`},
	}
	for name, h := range conflicts {
		wantProblem(t, name, patch("x", h...), http.StatusConflict, "version_conflict")
	}

	malformed := map[string]struct{ value, detail string }{
		"unquoted version":    {"v" + itoa(at), `"v` + itoa(at) + `"`},
		"unquoted in a list":  {`"v1", v` + itoa(at), `"v` + itoa(at) + `"`},
		"star in a list":      {`"v1", *`, `"v`},
		"unterminated quote":  {`"v` + itoa(at), `"v`},
		"weak without quotes": {`W/v` + itoa(at), `"v`},
	}
	for name, c := range malformed {
		r := patch("x", c.value)
		wantProblem(t, name, r, http.StatusBadRequest, "malformed_request")
		if !strings.Contains(r.String("detail"), c.detail) {
			t.Errorf("%s: detail %q does not show the quoted form %s", name, r.String("detail"), c.detail)
		}
	}

	r = patch("x")
	wantProblem(t, "no If-Match", r, http.StatusPreconditionRequired, "precondition_required")
	if !strings.Contains(r.String("detail"), "missing") {
		t.Errorf("no If-Match: detail %q does not say the header is missing", r.String("detail"))
	}
	r = patch("x", "*")
	wantProblem(t, "If-Match: *", r, http.StatusPreconditionRequired, "precondition_required")
	if d := r.String("detail"); !strings.Contains(d, "*") || strings.Contains(d, "missing") {
		t.Errorf("If-Match: *: detail %q does not say that * names no version", d)
	}
	if v := e.QueryInt(`SELECT version FROM products WHERE id = $1`, id); v != at {
		t.Errorf("version %d after refused writes, want %d", v, at)
	}

	// The order transitions read If-Match the same way.
	customer := e.NewCustomer(1_000_000_00)
	o := e.PlaceOrder(customer.Token, "ifm-order", testkit.Line(id, 1))
	if o.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", o.Status, o.Body)
	}
	cancel := e.Do("POST", "/v1/orders/"+o.String("id")+"/cancel", customer.Token, nil, "If-Match", `"v7", "v1"`)
	if cancel.Status != http.StatusOK || cancel.String("status") != "cancelled" {
		t.Errorf(`cancel with If-Match: "v7", "v1": %d %s`, cancel.Status, cancel.Body)
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestContractFingerprintCanonicalPathID: an id in the path is part of the
// fingerprint in its canonical form, so a retry that writes the same order
// id in upper case replays the first answer instead of answering 422
// idempotency_key_reused (EXT.IDEMPOTENCY.KEY.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestContractFingerprintCanonicalPathID(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	customer := e.NewCustomer(1_000_000_00)
	o := e.PlaceOrder(customer.Token, "canon-order", testkit.Line(id, 1))
	if o.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", o.Status, o.Body)
	}
	oid := o.String("id")
	first := e.Do("POST", "/v1/orders/"+oid+"/payments", customer.Token, map[string]any{"amount_cents": 40}, "Idempotency-Key", "pay-1")
	if first.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", first.Status, first.Body)
	}
	retry := e.Do("POST", "/v1/orders/"+strings.ToUpper(oid)+"/payments", customer.Token, map[string]any{"amount_cents": 40}, "Idempotency-Key", "pay-1")
	if retry.Status != http.StatusCreated || retry.Header.Get("Idempotent-Replayed") != "true" || string(retry.Body) != string(first.Body) {
		t.Errorf("retry with the id in upper case: %d %s (replayed %q), want the first 201 replayed",
			retry.Status, retry.Body, retry.Header.Get("Idempotent-Replayed"))
	}
	tag := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil).Header.Get("ETag")
	patch1 := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"price_cents": 120}, "If-Match", tag, "Idempotency-Key", "patch-1")
	if patch1.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", patch1.Status, patch1.Body)
	}
	patch2 := e.Do("PATCH", "/v1/products/"+strings.ToUpper(id), e.Staff.Token, map[string]any{"price_cents": 120}, "If-Match", tag, "Idempotency-Key", "patch-1")
	if patch2.Status != http.StatusOK || patch2.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("PATCH retried with the id in upper case: %d %s, want the first 200 replayed", patch2.Status, patch2.Body)
	}
	if n := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, oid); n != 40 {
		t.Errorf("paid %d, want 40", n)
	}
}
