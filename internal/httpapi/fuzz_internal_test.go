package httpapi

// Native Go fuzz targets for the pieces of the HTTP boundary that read what
// a caller sends (ADR 0010). Each states properties that must hold for every
// input, not only "does not panic". Seed corpora live in testdata/fuzz/;
// `make fuzz FUZZTIME=20s` runs each target for a bounded time, and a plain
// `go test` runs the seeds as regression tests.

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// fuzzServer is one Server with no database and a silent log, shared by
// every execution of a target.
var fuzzServer = sync.OnceValue(func() *Server {
	return NewServer(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
})

// requestDTOs are the request bodies the handlers decode, each with whether
// its operation accepts an empty body.
var requestDTOs = []struct {
	name       string
	new        func() any
	allowEmpty bool
}{
	{"createProduct", func() any { return new(createProductIn) }, false},
	{"updateProduct", func() any { return new(updateProductIn) }, false},
	{"adjustStock", func() any { return new(adjustStockIn) }, false},
	{"placeOrder", func() any { return new(placeOrderIn) }, false},
	{"recordPayment", func() any { return new(paymentIn) }, false},
	{"noBody", func() any { return new(struct{}) }, true},
}

// FuzzDecode: whatever the body, decoding answers nil or a caller's problem
// (400, 413 or 422 with a known code and a detail); a body it accepts is
// valid JSON (encoding/json agrees), names no member twice, and decodes to
// the same value again after a round trip through encoding; a 422 names a
// field.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"delta":5,"reason":"recount"}`,
		`{"delta":5,"delta":-500,"reason":"x"}`,
		`{"Delta":5}`,
		`{"lines":[{"product_id":"01a237b6-85a5-7acf-9996-41632f2c0246","quantity":2}]}`,
		`{"lines":[{"product_id":"a","quantity":"x"}]}`,
		`{"sku":"MUG-1","name":"Mug\u0000","price_cents":1200,"stock":10}`,
		`{"name":"\ud800"}`,
		`{"amount_cents":1e400}`,
		`[]`, `null`, ``, ` `, `{}{}`, `{"a":{"b":[1,2,{"c":null}]}}`,
		"{\"reason\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range requestDTOs {
			dst := d.new()
			p := asProblem(decodeBytes(body, dst, d.allowEmpty))
			if p == nil {
				if len(bytes.TrimSpace(body)) == 0 {
					continue
				}
				if !stdjson.Valid(body) {
					t.Fatalf("%s: accepted a body encoding/json calls invalid: %q", d.name, body)
				}
				if name, dup := duplicateMember(body); dup {
					t.Fatalf("%s: accepted a body that names %q twice: %q", d.name, name, body)
				}
				again, err := stdjson.Marshal(dst)
				if err != nil {
					t.Fatalf("%s: re-encode: %v", d.name, err)
				}
				second := d.new()
				if err := decodeBytes(again, second, d.allowEmpty); err != nil {
					t.Fatalf("%s: its own encoding %s is refused: %v", d.name, again, err)
				}
				if !reflect.DeepEqual(dst, second) {
					t.Fatalf("%s: round trip changed %#v into %#v", d.name, dst, second)
				}
				continue
			}
			checkCallerProblem(t, d.name, p)
			switch p.Status {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			case http.StatusUnprocessableEntity:
				if len(p.Errors) == 0 || p.Errors[0].Field == "" {
					t.Fatalf("%s: 422 without a field: %+v", d.name, p)
				}
			default:
				t.Fatalf("%s: status %d for a body", d.name, p.Status)
			}
		}
	})
}

// checkCallerProblem fails unless p is a complete 4xx problem.
func checkCallerProblem(t *testing.T, what string, p *Problem) {
	t.Helper()
	if s := answerOf(p.Code); !wellFormed(p.Code) || s.status != p.Status || p.Status < 400 || p.Status > 499 || p.Detail == "" || p.Title == "" {
		t.Fatalf("%s: not a caller's problem: %+v", what, p)
	}
	if !utf8.ValidString(p.Detail) {
		t.Fatalf("%s: detail is not UTF-8: %q", what, p.Detail)
	}
}

// duplicateMember reports a member named twice in one object, with
// encoding/json's tokenizer (which unescapes names) as the independent judge.
func duplicateMember(body []byte) (string, bool) {
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj, key bool
		seen     map[string]bool
	}
	var stack []frame
	after := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].key {
			if tok == stdjson.Delim('}') {
				stack = stack[:n-1]
				after()
				continue
			}
			name := tok.(string)
			if stack[n-1].seen[name] {
				return name, true
			}
			stack[n-1].seen[name] = true
			stack[n-1].key = false
			continue
		}
		switch tok {
		case stdjson.Delim('{'):
			stack = append(stack, frame{obj: true, key: true, seen: map[string]bool{}})
		case stdjson.Delim('['):
			stack = append(stack, frame{})
		case stdjson.Delim(']'):
			stack = stack[:len(stack)-1]
			after()
		default:
			after()
		}
	}
}

// FuzzIfMatch: the If-Match parser never fails open. Versions come only
// from strong tags that etag renders exactly and that appear in the header;
// every outcome is one of 428, 400, 409 or "let the use case compare"; a
// list built from rendered tags is read back whole; and a malformed value's
// detail shows a quoted form.
func FuzzIfMatch(f *testing.F) {
	for _, s := range []string{`"v1"`, `"v1", "v2"`, `W/"v3"`, `*`, `v3`, `"v1", *`, `"a,b", "v2"`, ``, ` , `, `"v01"`, `W/v1`, "\"v1\x00\""} {
		f.Add(s, s, int64(1))
	}
	f.Fuzz(func(t *testing.T, a, b string, v int64) {
		lines := []string{a}
		if b != "" {
			lines = append(lines, b)
		}
		m := parseIfMatch(lines)
		joined := strings.Join(lines, ",")
		for _, got := range m.versions {
			if got < 1 || !strings.Contains(joined, etag(got)) {
				t.Fatalf("parseIfMatch(%q) names version %d that the header does not hold", lines, got)
			}
		}
		if m.result != ifMatchTags && len(m.versions) > 0 {
			t.Fatalf("parseIfMatch(%q): result %d with versions %v", lines, m.result, m.versions)
		}
		p := asProblem(m.err())
		switch {
		case p == nil:
			if m.result != ifMatchTags || len(m.versions) == 0 {
				t.Fatalf("parseIfMatch(%q) lets a write through with %+v", lines, m)
			}
		case m.result == ifMatchMalformed:
			if p.Status != http.StatusBadRequest || !strings.Contains(p.Detail, `If-Match: "`) {
				t.Fatalf("malformed %q: %+v", lines, p)
			}
		default:
			checkCallerProblem(t, "If-Match", p)
		}

		// A list of rendered tags, weak ones mixed in, is read back exactly.
		if v < 1 {
			return
		}
		ver := domain.Version(v)
		m = parseIfMatch([]string{`W/"v0", ` + etag(ver) + `, "x"`})
		if m.result != ifMatchTags || len(m.versions) != 1 || m.versions[0] != ver {
			t.Fatalf("list with %s read as %+v", etag(ver), m)
		}
		if !noneMatch([]string{`"x", ` + etag(ver)}, ver) || !noneMatch([]string{"W/" + etag(ver)}, ver) {
			t.Fatalf("If-None-Match does not match its own tag %s", etag(ver))
		}
	})
}

// FuzzIfNoneMatch: If-None-Match matches version v only through "*" or a
// tag that is, weakly compared, exactly etag(v).
func FuzzIfNoneMatch(f *testing.F) {
	for _, s := range []string{`"v1"`, `W/"v1"`, `*`, `"v2", "v1"`, `v1`, `"v1`, `"a,"v1""`, ``} {
		f.Add(s, int64(1))
	}
	f.Fuzz(func(t *testing.T, h string, v int64) {
		if v < 1 {
			v = 1
		}
		ver := domain.Version(v)
		if !noneMatch([]string{h}, ver) {
			return
		}
		if trimOWS(h) == "*" {
			return
		}
		tags, _, ok := entityTags(h)
		if !ok {
			t.Fatalf("noneMatch(%q) matched a value that is not a list of tags", h)
		}
		for _, tag := range tags {
			if tag.opaque == etag(ver) {
				return
			}
		}
		t.Fatalf("noneMatch(%q, %d) matched without the tag %s", h, v, etag(ver))
	})
}

// FuzzIdempotencyKey: an accepted key is 1 to 255 printable ASCII
// characters, and a key sent bare or as a structured-field string is the
// same key.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\b"`, `abc"`, "", " ", `"`, "a\x00b", "clé", strings.Repeat("k", 255), strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		key, present, ok := parseKey([]string{h})
		if !present {
			t.Fatalf("parseKey(%q): a sent header is absent", h)
		}
		if !ok {
			if key != "" {
				t.Fatalf("parseKey(%q) refused but returned %q", h, key)
			}
			return
		}
		if len(key) < 1 || len(key) > 255 {
			t.Fatalf("parseKey(%q) = %q: %d characters", h, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("parseKey(%q) = %q holds byte %#x", h, key, key[i])
			}
		}
		if key != strings.TrimSpace(key) {
			return // an sf-string may keep inner edges that a bare form would trim
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, _, ok := parseKey([]string{quoted}); !ok || again != key {
			t.Fatalf("key %q as an sf-string %s reads as %q, %v", key, quoted, again, ok)
		}
		if key[0] != '"' {
			if again, _, ok := parseKey([]string{key}); !ok || again != key {
				t.Fatalf("key %q sent bare reads as %q, %v", key, again, ok)
			}
		}
	})
}

// FuzzFingerprint: the fingerprint's canonical form. Equal commands on one
// route hash equal, whatever the case of the path id or the member order and
// spacing of the body they were decoded from; different commands, or the
// same command on another resource, hash differently.
func FuzzFingerprint(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, int64(1), int64(2), true, "x")
	f.Add(make([]byte, 40), int64(1000), int64(1), false, "")
	f.Fuzz(func(t *testing.T, seed []byte, q1, q2 int64, upper bool, reason string) {
		var id uuid.UUID
		copy(id[:], seed)
		var other uuid.UUID
		copy(other[:], seed)
		other[15] ^= 0xff

		lower := "/v1/products/" + id.String() + "/stock-adjustments"
		spelled := lower
		if upper {
			spelled = "/v1/products/" + strings.ToUpper(id.String()) + "/stock-adjustments"
		}
		// The handler parses the path's id (pathID) into the command.
		fp := func(_, param string, cmd app.AdjustStockCommand) [32]byte {
			cmd.ProductID = uuid.MustParse(param)
			sum, _, err := fingerprints(fingerprintForms, "adjustStock", cmd)
			if err != nil {
				t.Fatal(err)
			}
			return sum
		}
		cmd := app.AdjustStockCommand{ProductID: id, Delta: q1, Reason: reason}
		if fp(lower, id.String(), cmd) != fp(spelled, spelled[len("/v1/products/"):len("/v1/products/")+36], cmd) {
			t.Fatalf("one id in two spellings hashes differently")
		}
		if fp(lower, id.String(), cmd) == fp("/v1/products/"+other.String()+"/stock-adjustments", other.String(), cmd) {
			t.Fatalf("two resources hash equal")
		}
		changed := cmd
		changed.Delta = q2
		if q1 != q2 && fp(lower, id.String(), cmd) == fp(lower, id.String(), changed) {
			t.Fatalf("deltas %d and %d hash equal", q1, q2)
		}

		// The body's form does not matter: two spellings of one body
		// decode to one command.
		reasonJSON, _ := stdjson.Marshal(reason)
		a := fmt.Sprintf(`{"delta":%d,"reason":%s}`, q1, reasonJSON)
		b := fmt.Sprintf("{ \"reason\" : %s ,\n\t\"delta\":%d }", reasonJSON, q1)
		var ina, inb adjustStockIn
		pa, pb := decodeBytes([]byte(a), &ina, false), decodeBytes([]byte(b), &inb, false)
		if (pa == nil) != (pb == nil) {
			t.Fatalf("%s and %s: one decodes, the other does not", a, b)
		}
		if pa == nil && fp(lower, id.String(), app.AdjustStockCommand{ProductID: id, Delta: *ina.Delta, Reason: *ina.Reason}) !=
			fp(spelled, strings.ToUpper(id.String()), app.AdjustStockCommand{ProductID: id, Delta: *inb.Delta, Reason: *inb.Reason}) {
			t.Fatalf("%s and %s hash differently", a, b)
		}

		// Placements: different lines hash differently.
		q := func(v int64) domain.Quantity { return domain.Quantity(v%1000 + 1) }
		p1 := app.PlaceOrderCommand{Lines: []domain.LineRequest{{ProductID: id, Quantity: q(q1)}, {ProductID: other, Quantity: q(q2)}}}
		p2 := app.PlaceOrderCommand{Lines: []domain.LineRequest{{ProductID: id, Quantity: q(q2)}, {ProductID: other, Quantity: q(q1)}}}
		h1, _, _ := fingerprints(fingerprintForms, "placeOrder", p1)
		h2, _, _ := fingerprints(fingerprintForms, "placeOrder", p2)
		if (h1 == h2) != reflect.DeepEqual(p1, p2) {
			t.Fatalf("placements %v and %v: equal hashes %v", p1, p2, h1 == h2)
		}
	})
}

// FuzzProblemRendering: whatever code, detail and field a problem carries,
// the response is one valid application/problem+json object whose members
// agree with the status line; a code answers its row of statusOf or the
// default (409, titled with its words); a problem whose code is not well
// formed (none, or bytes no code has) is a 500 internal; every 503 has
// Retry-After.
func FuzzProblemRendering(f *testing.F) {
	for _, c := range []string{"validation_failed", "unavailable", "no_such_code", "", "\xff", "Upper_case", "internal", "version_conflict"} {
		f.Add(c, "a detail", "lines[0].quantity", "/v1/orders")
	}
	f.Add("malformed_request", "\xff\x00<script>", "\u2028", "/v1/\x00")
	f.Fuzz(func(t *testing.T, codeText, detail, field, path string) {
		s := fuzzServer()
		code := domain.Code(codeText)
		p := problem(code, detail)
		if field != "" {
			p.Errors = []fieldError{{Field: field, Message: "must be fine"}}
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = path
		s.writeProblem(rec, req, p)

		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q", ct)
		}
		var got map[string]any
		if err := stdjson.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("body is not JSON: %v: %q", err, rec.Body.Bytes())
		}
		if !utf8.Valid(rec.Body.Bytes()) {
			t.Fatalf("body is not UTF-8: %q", rec.Body.Bytes())
		}
		status, _ := got["status"].(float64)
		if int(status) != rec.Code || got["code"] == "" || got["type"] != "urn:ordersvc:problem:"+got["code"].(string) {
			t.Fatalf("status line %d, body %v", rec.Code, got)
		}
		want, wantCode := answerOf(code), codeText
		if !wellFormed(code) {
			want, wantCode = answerOf(domain.CodeInternal), string(domain.CodeInternal)
		}
		if rec.Code != want.status || got["code"] != wantCode || got["title"] != want.title {
			t.Fatalf("code %q answered %d %v %v; want %d %s %q", code, rec.Code, got["code"], got["title"], want.status, wantCode, want.title)
		}
		if rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		if _, err := strconv.Atoi(rec.Header().Get("Retry-After") + "0"); err != nil {
			t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
		}
	})
}

// asProblem is how the adapter would answer err (nil for no error).
func asProblem(err error) *Problem {
	if err == nil {
		return nil
	}
	return problemFor(err)
}
