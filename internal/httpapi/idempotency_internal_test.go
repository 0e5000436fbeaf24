package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 255)
	cases := []struct {
		name    string
		header  []string
		key     string
		present bool
		ok      bool
	}{
		{"absent", nil, "", false, true},
		{"bare", []string{"abc"}, "abc", true, true},
		{"bare with surrounding space", []string{"  abc "}, "abc", true, true},
		{"bare with inner space", []string{"a b"}, "a b", true, true},
		{"sf-string", []string{`"abc"`}, "abc", true, true},
		{"sf-string escaped quote", []string{`"a\"b"`}, `a"b`, true, true},
		{"sf-string escaped backslash", []string{`"a\\b"`}, `a\b`, true, true},
		{"bare holding a quote", []string{`abc"`}, `abc"`, true, true},
		{"length 1", []string{"k"}, "k", true, true},
		{"length 255", []string{long}, long, true, true},
		{"sf-string of 255", []string{`"` + long + `"`}, long, true, true},
		{"printable edges", []string{" !~"}, "!~", true, true},

		{"empty", []string{""}, "", true, false},
		{"blank", []string{"   "}, "", true, false},
		{"length 256", []string{long + "k"}, "", true, false},
		{"sf-string of 256", []string{`"` + long + `k"`}, "", true, false},
		{"empty sf-string", []string{`""`}, "", true, false},
		{"lone quote", []string{`"`}, "", true, false},
		{"unterminated", []string{`"abc`}, "", true, false},
		{"unescaped inner quote", []string{`"a"b"`}, "", true, false},
		{"unknown escape", []string{`"a\nb"`}, "", true, false},
		{"dangling escape", []string{`"a\"`}, "", true, false},
		{"control character", []string{"a\x01b"}, "", true, false},
		{"tab", []string{"a\tb"}, "", true, false},
		{"DEL", []string{"a\x7fb"}, "", true, false},
		{"non-ASCII", []string{"clé"}, "", true, false},
		{"non-ASCII in sf-string", []string{`"clé"`}, "", true, false},
		{"two headers", []string{"a", "b"}, "", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			key, present, ok := parseKey(c.header)
			if key != c.key || present != c.present || ok != c.ok {
				t.Errorf("parseKey(%q) = %q, %v, %v; want %q, %v, %v", c.header, key, present, ok, c.key, c.present, c.ok)
			}
		})
	}
}

// fpRequest describes one request whose fingerprint is computed the way the
// stock-adjustment handler computes it: strict decode, command, route.
type fpRequest struct {
	method, pattern, path, body string
	header                      map[string]string
}

func (f fpRequest) sum(t *testing.T) [32]byte {
	t.Helper()
	var sum [32]byte
	var fpErr error
	called := false
	r := chi.NewRouter()
	r.MethodFunc(f.method, f.pattern, func(w http.ResponseWriter, req *http.Request) {
		called = true
		var in adjustStockIn
		if err := decode(w, req, &in, false); err != nil {
			t.Fatalf("decode %s: %v", f.body, err)
		}
		cmd := app.AdjustStockCommand{ProductID: uuid.MustParse(chi.URLParam(req, "id")), Delta: *in.Delta, Reason: *in.Reason}
		// The operation names the route: another route or method is
		// another operation, here with the same form.
		op := f.method + " " + f.pattern
		if op == "POST /v1/products/{id}/stock-adjustments" {
			op = "adjustStock"
		}
		forms := map[string][]fingerprintForm{op: fingerprintForms["adjustStock"]}
		sum, _, fpErr = fingerprints(forms, op, cmd)
	})
	req := httptest.NewRequest(f.method, f.path, strings.NewReader(f.body))
	for k, v := range f.header {
		req.Header.Set(k, v)
	}
	r.ServeHTTP(httptest.NewRecorder(), req)
	if !called || fpErr != nil {
		t.Fatalf("fingerprint of %+v: called %v, err %v", f, called, fpErr)
	}
	return sum
}

// TestFingerprintCanonical: the fingerprint is the same for the same command
// whatever the JSON's member order, whitespace, credentials or key, and
// differs for another value, path parameter, route or method
// (EXT.IDEMPOTENCY.KEY.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestFingerprintCanonical(t *testing.T) {
	t.Parallel()
	const pattern = "/v1/products/{id}/stock-adjustments"
	a, b := "0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0001", "0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0002"
	base := fpRequest{method: "POST", pattern: pattern, path: "/v1/products/" + a + "/stock-adjustments",
		body:   `{"delta":5,"reason":"restock"}`,
		header: map[string]string{"Authorization": "Bearer osk_one", "Idempotency-Key": "k1"}}
	want := base.sum(t)

	with := func(change func(*fpRequest)) fpRequest {
		f := base
		f.header = map[string]string{}
		for k, v := range base.header {
			f.header[k] = v
		}
		change(&f)
		return f
	}
	same := map[string]fpRequest{
		"members reordered":   with(func(f *fpRequest) { f.body = `{"reason":"restock","delta":5}` }),
		"whitespace":          with(func(f *fpRequest) { f.body = "\n{ \"delta\" :\t5 ,\r\n \"reason\": \"restock\" }  \n" }),
		"another token":       with(func(f *fpRequest) { f.header["Authorization"] = "Bearer osk_two" }),
		"another key":         with(func(f *fpRequest) { f.header["Idempotency-Key"] = `"k2"` }),
		"no key":              with(func(f *fpRequest) { delete(f.header, "Idempotency-Key") }),
		"other headers":       with(func(f *fpRequest) { f.header["X-Request-Id"] = "r-1"; f.header["Content-Type"] = "text/plain" }),
		"escaped same string": with(func(f *fpRequest) { f.body = `{"delta":5,"reason":"re\u0073tock"}` }),
	}
	for name, f := range same {
		if got := f.sum(t); got != want {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
	differ := map[string]fpRequest{
		"another delta":  with(func(f *fpRequest) { f.body = `{"delta":6,"reason":"restock"}` }),
		"another reason": with(func(f *fpRequest) { f.body = `{"delta":5,"reason":"Restock"}` }),
		"another id":     with(func(f *fpRequest) { f.path = "/v1/products/" + b + "/stock-adjustments" }),
		"another route": with(func(f *fpRequest) {
			f.pattern = "/v1/orders/{id}/stock-adjustments"
			f.path = "/v1/orders/" + a + "/stock-adjustments"
		}),
		"another method": with(func(f *fpRequest) { f.method = "PUT" }),
	}
	for name, f := range differ {
		if got := f.sum(t); got == want {
			t.Errorf("%s: fingerprint did not change", name)
		}
	}
}
