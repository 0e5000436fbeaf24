package httpapi_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// shape turns a value into a pattern of its form: digits, hex runs and UUIDs
// become classes, so that an example and a real value compare by form.
func shape(s string) string {
	s = uuidPattern.ReplaceAllString(s, "<uuid>")
	s = regexp.MustCompile(`\b[0-9a-f]*[0-9][0-9a-f]*\b`).ReplaceAllStringFunc(s, func(h string) string {
		if len(h) < 8 {
			return h
		}
		return fmt.Sprintf("<hex%d>", len(h))
	})
	return regexp.MustCompile(`[0-9]+`).ReplaceAllString(s, "<n>")
}

// Every example of the OpenAPI document agrees with what the service really
// answers: each problem example is provoked against the real handler and
// must match member for member (type, title, status, code, detail, errors),
// with request_id and instance of the same form as the real ones; the ETag
// examples have the form of a real ETag. A changed detail text or problem
// type, or an example invented by hand, fails here.
func TestOpenAPIExamplesMatchRealResponses(t *testing.T) {
	doc, err := apiDoc()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	e := httpkit.New(t)
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 1200, Stock: 10})

	// provoke gives, for each response of components.responses that has a
	// problem example, a real request producing that example's situation.
	provoke := map[string]func() *httpkit.Response{
		"BadRequest": func() *httpkit.Response {
			return e.Do("POST", "/v1/products", e.Staff.Token,
				map[string]any{"sku": "EX-1", "name": "Mug", "price_cents": 1200, "stock": 1, "colour": "red"})
		},
		"Conflict": func() *httpkit.Response {
			return e.Do("PATCH", "/v1/products/"+product, e.Staff.Token, map[string]any{"price_cents": 1500}, "If-Match", `"v9"`)
		},
		"Unprocessable": func() *httpkit.Response {
			return e.Do("POST", "/v1/orders", customer.Token,
				map[string]any{"lines": []any{map[string]any{"product_id": product, "quantity": 0}}}, "Idempotency-Key", "ex-1")
		},
	}

	names := make([]string, 0, len(doc.Components.Responses))
	for name := range doc.Components.Responses {
		names = append(names, name)
	}
	slices.Sort(names)
	checked := 0
	for _, name := range names {
		mt := doc.Components.Responses[name].Value.Content.Get("application/problem+json")
		if mt == nil || mt.Example == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			fn, ok := provoke[name]
			if !ok {
				t.Fatalf("components.responses.%s has a problem example but this test cannot provoke it: add a request to provoke", name)
			}
			res := fn()
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			var real map[string]any
			if err := json.Unmarshal(res.Body, &real); err != nil {
				t.Fatalf("%d %s: %v", res.Status, res.Body, err)
			}
			example := normalize(t, mt.Example)
			for member, want := range example {
				got, ok := real[member]
				switch {
				case !ok:
					t.Errorf("example member %q is absent from the real answer %s", member, res.Body)
				case member == "request_id" || member == "instance":
					if shape(fmt.Sprint(want)) != shape(fmt.Sprint(got)) {
						t.Errorf("%s: example %q has another form than the real %q", member, want, got)
					}
				case !reflect.DeepEqual(want, got):
					t.Errorf("%s: example %v, real %v", member, want, got)
				}
			}
			for member := range real {
				if _, ok := example[member]; !ok && member != "instance" {
					t.Errorf("the real answer has %q, the example does not: %s", member, res.Body)
				}
			}
			if got := res.Header.Get("X-Request-Id"); got != real["request_id"] {
				t.Errorf("X-Request-Id %q differs from request_id %v", got, real["request_id"])
			}
		})
		checked++
	}
	if checked == 0 {
		t.Fatal("no problem examples found in components.responses")
	}

	// ETag examples, wherever a header or parameter named ETag, If-Match or
	// If-None-Match carries one.
	realTag := e.Do("GET", "/v1/products/"+product, customer.Token, nil).Header.Get("ETag")
	var tags []string
	for _, h := range doc.Components.Headers {
		if h.Value.Example != nil {
			tags = append(tags, fmt.Sprint(h.Value.Example))
		}
	}
	for _, p := range doc.Components.Parameters {
		if p.Value.Example != nil && slices.Contains([]string{"If-Match", "If-None-Match"}, p.Value.Name) {
			tags = append(tags, fmt.Sprint(p.Value.Example))
		}
	}
	if len(tags) == 0 {
		t.Error("no ETag examples found")
	}
	for _, tag := range tags {
		if shape(tag) != shape(realTag) {
			t.Errorf("ETag example %s has another form than a real ETag %s", tag, realTag)
		}
	}
	t.Logf("%d problem examples and %d ETag examples match real answers", checked, len(tags))
}

// normalize turns a YAML-decoded example into what encoding/json would decode.
func normalize(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
