package httpapi

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// TestDecode: bodies are judged by their content: one JSON object with known
// members, at most 1 MiB. Type errors name the field (422); everything else
// unparsable is 400.
func TestDecode(t *testing.T) {
	t.Parallel()
	pad := func(n int) string { // a valid body of exactly n bytes
		const shell = `{"delta":1,"reason":""}`
		return `{"delta":1,"reason":"` + strings.Repeat("r", n-len(shell)) + `"}`
	}
	cases := []struct {
		name       string
		body       string
		allowEmpty bool
		code       domain.Code // "" when the body is accepted
		fields     []string    // for validation_failed
		detail     string      // a substring of the detail
	}{
		{"object", `{"delta":1,"reason":"x"}`, false, "", nil, ""},
		{"members reordered, spaced", " {\n\"reason\": \"x\" ,\t\"delta\" : -1 }\n ", false, "", nil, ""},
		{"partial object", `{"delta":1}`, false, "", nil, ""},
		{"null", `null`, false, "", nil, ""},
		{"exactly 1 MiB", pad(maxBody), false, "", nil, ""},
		{"empty, allowed", ``, true, "", nil, ""},
		{"blank, allowed", " \n\t", true, "", nil, ""},

		{"one byte over 1 MiB", pad(maxBody + 1), false, domain.CodeTooLarge, nil, "1048576"},
		{"empty", ``, false, domain.CodeMalformed, nil, "required"},
		{"blank", "  \n", false, domain.CodeMalformed, nil, "required"},
		{"unknown member", `{"delta":1,"colour":"red"}`, false, domain.CodeMalformed, nil, `"colour"`},
		{"unknown member, empty allowed", `{"why":"x"}`, true, domain.CodeMalformed, nil, `"why"`},
		{"form body", `delta=1&reason=x`, false, domain.CodeMalformed, nil, "not valid JSON"},
		{"truncated", `{"delta":1,`, false, domain.CodeMalformed, nil, "not valid JSON"},
		{"two values", `{"delta":1} {"delta":2}`, false, domain.CodeMalformed, nil, "single JSON value"},
		{"trailing text", `{"delta":1}xyz`, false, domain.CodeMalformed, nil, "single JSON value"},
		{"trailing bracket", `{"delta":1}]`, false, domain.CodeMalformed, nil, "single JSON value"},
		{"array", `[{"delta":1}]`, false, domain.CodeMalformed, nil, "JSON object"},
		{"string", `"delta"`, false, domain.CodeMalformed, nil, "JSON object"},
		{"number", `42`, false, domain.CodeMalformed, nil, "JSON object"},
		{"single quotes", `{'delta':1}`, false, domain.CodeMalformed, nil, "not valid JSON"},

		{"string for integer", `{"delta":"1"}`, false, "validation_failed", []string{"delta"}, ""},
		{"fraction for integer", `{"delta":1.5}`, false, "validation_failed", []string{"delta"}, ""},
		{"integer overflow", `{"delta":99999999999999999999}`, false, "validation_failed", []string{"delta"}, ""},
		{"number for string", `{"reason":5}`, false, "validation_failed", []string{"reason"}, ""},
		{"object for string", `{"reason":{}}`, false, "validation_failed", []string{"reason"}, ""},

		// Strict JSON (ADR 0010).
		{"duplicate member", `{"delta":1,"delta":-1}`, false, domain.CodeMalformed, nil, `"delta" appears twice in the top-level object`},
		{"duplicate spelled with an escape", `{"delta":1,"\u0064elta":-1}`, false, domain.CodeMalformed, nil, `"delta" appears twice in the top-level object`},
		{"duplicate unknown members", `{"x":1,"x":2}`, false, domain.CodeMalformed, nil, `"x"`},
		{"member in another case", `{"Delta":1}`, false, domain.CodeMalformed, nil, `did you mean "delta"`},
		{"member in upper case", `{"REASON":"x"}`, false, domain.CodeMalformed, nil, `did you mean "reason"`},
		{"invalid UTF-8 in a string", "{\"reason\":\"\xff\"}", false, domain.CodeMalformed, nil, "not valid JSON"},
		{"invalid UTF-8 in a name", "{\"\xffdelta\":1}", false, domain.CodeMalformed, nil, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var dst adjustStockIn
			req := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			p := asProblem(decode(httptest.NewRecorder(), req, &dst, c.allowEmpty))
			if c.code == "" {
				if p != nil {
					t.Fatalf("refused: %s %s", p.Code, p.Detail)
				}
				return
			}
			if p == nil {
				t.Fatalf("accepted, want %s", c.code)
			}
			if p.Code != c.code || p.Status != answerOf(c.code).status {
				t.Fatalf("%d %s (%s), want %s", p.Status, p.Code, p.Detail, c.code)
			}
			if !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q lacks %q", p.Detail, c.detail)
			}
			var fields []string
			for _, f := range p.Errors {
				fields = append(fields, f.Field)
				if f.Message == "" {
					t.Errorf("field %s has no message", f.Field)
				}
			}
			if !slices.Equal(fields, c.fields) {
				t.Errorf("fields %q, want %q", fields, c.fields)
			}
		})
	}
}

// TestDecodeNestedTypeError: a type error inside an array names the
// element's index ("lines[1].quantity").
func TestDecodeNestedTypeError(t *testing.T) {
	t.Parallel()
	var dst placeOrderIn
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"lines":[{"product_id":"a","quantity":1},{"product_id":"b","quantity":"x"}]}`))
	p := asProblem(decode(httptest.NewRecorder(), req, &dst, false))
	if p == nil || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "lines[1].quantity" {
		t.Fatalf("problem %+v", p)
	}
}
