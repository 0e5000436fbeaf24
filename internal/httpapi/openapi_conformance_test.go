package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// apiDoc is the OpenAPI document, loaded and validated once.
var apiDoc = sync.OnceValues(func() (*openapi3.T, error) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, err
	}
	return doc, doc.Validate(loader.Context)
})

// conformance sends real requests to the real handler and checks every
// answer against the OpenAPI document, recording which operations answered
// what and which problem codes it saw. TestOpenAPIConformance drives it with
// its scripted flows, TestRequestsFileRunsTopToBottom with requests.http,
// and TestContractOfEveryOperation with variants of the file's requests.
type conformance struct {
	t      *testing.T
	e      *httpkit.Env
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options

	// noTrace: every write it sends that is refused with a 4xx must leave
	// every table as it was (tableDigest before and after). Off while another
	// request may be writing at the same time.
	noTrace bool
	// where, when set, names the source of the request being checked
	// (requests.http:line) in check's failures.
	where string

	mu sync.Mutex
	// valid: the statuses of the document-valid answers of each operation.
	valid map[string][]int
	codes map[string]int
}

func newConformance(t *testing.T, e *httpkit.Env) *conformance {
	t.Helper()
	doc, err := apiDoc()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &conformance{
		t: t, e: e, doc: doc, router: router,
		opts: &openapi3filter.Options{
			IncludeResponseStatus: true,
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{
				openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
			},
		},
		valid: map[string][]int{}, codes: map[string]int{},
	}
}

// do sends a request and validates the answer against the operation the
// document routes it to; it fails the test when no operation matches.
func (c *conformance) do(method, path, token string, body any, headers ...string) *httpkit.Response {
	c.t.Helper()
	return c.check(method, path, func() *httpkit.Response { return c.send(method, path, token, body, headers...) })
}

// check runs send, a request of method to path, and checks its answer: a
// 4xx to a write left every table as it was (with noTrace), and the answer
// is one the document gives for the operation it routes the request to.
func (c *conformance) check(method, path string, send func() *httpkit.Response) *httpkit.Response {
	c.t.Helper()
	write := method != http.MethodGet && method != http.MethodHead
	var before map[string]string
	if c.noTrace && write {
		before = tableDigest(c.t, c.e)
	}
	res := send()
	if before != nil && res.Status >= 400 && res.Status < 500 {
		for tbl, d := range tableDigest(c.t, c.e) {
			if before[tbl] != d {
				c.t.Errorf("%s%s %s -> %d %s: table %s changed; a refused request leaves no trace", c.where, method, path, res.Status, res.Code(), tbl)
			}
		}
	}
	req := httptest.NewRequest(method, path, nil)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s%s %s: no operation in the document: %v", c.where, method, path, err)
		return res
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.opts},
		Status:                 res.Status,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(res.Body)),
		Options:                c.opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s%s %s -> %d: the answer does not match operation %s:\n%v\nbody: %s",
			c.where, method, path, res.Status, route.Operation.OperationID, err, res.Body)
		return res
	}
	c.mu.Lock()
	c.valid[route.Operation.OperationID] = append(c.valid[route.Operation.OperationID], res.Status)
	c.mu.Unlock()
	return res
}

// operationOf names the operation of the document a request goes to, or "".
func (c *conformance) operationOf(method, path string) string {
	route, _, err := c.router.FindRoute(httptest.NewRequest(method, path, nil))
	if err != nil {
		return ""
	}
	return route.Operation.OperationID
}

// offDocument sends a request that no operation describes (unknown route,
// unsupported method) and checks that its answer is a valid Problem.
func (c *conformance) offDocument(method, path, token string) *httpkit.Response {
	c.t.Helper()
	res := c.send(method, path, token, nil)
	if _, _, err := c.router.FindRoute(httptest.NewRequest(method, path, nil)); err == nil {
		c.t.Errorf("%s %s is in the document", method, path)
	}
	var v any
	if err := json.Unmarshal(res.Body, &v); err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if err := c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.t.Errorf("%s %s -> %d: not a Problem: %v", method, path, res.Status, err)
	}
	return res
}

func (c *conformance) send(method, path, token string, body any, headers ...string) *httpkit.Response {
	c.t.Helper()
	res := c.e.Do(method, path, token, body, headers...)
	if res.Err != nil {
		c.t.Fatalf("%s %s: %v", method, path, res.Err)
	}
	c.seen(res)
	return res
}

// seen records the problem code of an answer.
func (c *conformance) seen(res *httpkit.Response) {
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		c.mu.Lock()
		c.codes[res.Code()]++
		c.mu.Unlock()
	}
}

// want fails unless res has status and, for a problem, code.
func (c *conformance) want(res *httpkit.Response, status int, code string) *httpkit.Response {
	c.t.Helper()
	return c.wantAs("the request", res, status, code)
}

// wantAs is want, naming the case in its failure.
func (c *conformance) wantAs(what string, res *httpkit.Response, status int, code string) *httpkit.Response {
	c.t.Helper()
	if res.Status != status || res.Code() != code {
		c.t.Errorf("%s: answered %d %s, want %d %q", what, res.Status, res.Body, status, code)
	}
	return res
}

// TestOpenAPIConformance drives the operations through scripted flows, with
// the main success and error answers of each, and checks every answer
// against the document and that every problem code seen is in the
// ProblemCode enum. Every write it sends one at a time that is refused with
// a 4xx must leave every table as it was. The flows test behaviour; they do
// not have to reach every operation: TestRequestsFileRunsTopToBottom fails
// unless each operation answers a success in requests.http, and
// TestContractOfEveryOperation sends each operation the refusals its entry
// in the operations table promises (TestContractRejectionsLeaveNoTrace adds
// the refusals that need a setup of their own).
func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	c := newConformance(t, e)
	c.noTrace = true
	staff := e.Staff.Token
	alice := e.NewCustomer(50_000)
	bob := e.NewCustomer(50_000)

	conformOperations(c)
	pid := conformProducts(c, staff, alice.Token)
	conformOrders(c, staff, alice.Token, bob.Token, pid)
	conformActors(c, staff, bob)
	conformOffDocument(c, staff)

	// Last: a database that is gone.
	e.Pool.Close()
	c.want(c.do("GET", "/readyz", "", nil), 503, "unavailable")
	if res := c.do("GET", "/v1/products", staff, nil); res.Status < 500 {
		t.Errorf("no database: %d %s, want 5xx", res.Status, res.Body)
	}

	c.checkCodes()
}

// TestOpenAPIConformanceInProgress checks the 409 idempotency_in_progress
// answer, with its Retry-After, against the document.
func TestOpenAPIConformanceInProgress(t *testing.T) {
	t.Parallel()
	e := keysEnv(t, 100*time.Millisecond, false)
	c := newConformance(t, e)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	stop := e.Hooks.Stop(testkit.After, "StockAdjust") // the original holds its key
	first := make(chan struct{})
	go func() {
		defer close(first)
		e.Do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "slow")
	}()
	stop.WaitArrived(t, 10*time.Second)
	c.want(c.do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "slow"), 409, "idempotency_in_progress")
	stop.Release()
	<-first
}

// TestOperationsMatchTheDocument: every operation of the table
// (operations.go) is in openapi.yaml under its name, method and route, with
// its success status, its Idempotency-Key and If-Match parameters (required
// or not), a 403 answer exactly when it has an access rule, and no
// credentials outside /v1; and every operation of the document is in the
// table.
func TestOperationsMatchTheDocument(t *testing.T) {
	t.Parallel()
	doc, err := apiDoc()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	inTable := map[string]bool{}
	for _, want := range httpapi.Operations() {
		inTable[want.Method+" "+want.Route] = true
		item := doc.Paths.Value(want.Route)
		if item == nil || item.GetOperation(want.Method) == nil {
			t.Errorf("%s: %s %s is not in the document", want.Name, want.Method, want.Route)
			continue
		}
		op := item.GetOperation(want.Method)
		if got := documented(want.Method, want.Route, item, op); got != want {
			t.Errorf("%s %s:\n table    %+v\n document %+v", want.Method, want.Route, want, got)
		}
		if public := op.Security != nil && len(*op.Security) == 0; public == strings.HasPrefix(want.Route, "/v1/") {
			t.Errorf("%s %s: public in the document %v, but only the routes outside /v1 are", want.Method, want.Route, public)
		}
	}
	for route, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !inTable[method+" "+route] {
				t.Errorf("operation %s (%s %s) of the document is not in the table", op.OperationID, method, route)
			}
		}
	}
}

// documented reads an operation of the document as the table declares one.
func documented(method, route string, item *openapi3.PathItem, op *openapi3.Operation) httpapi.Operation {
	got := httpapi.Operation{Name: op.OperationID, Method: method, Route: route}
	for code := range op.Responses.Map() {
		if n, err := strconv.Atoi(code); err == nil && n >= 200 && n < 300 {
			got.Status = n
		}
	}
	got.Restricted = op.Responses.Value("403") != nil
	for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
		switch {
		case p.Value.In != "header":
		case p.Value.Name == "Idempotency-Key" && p.Value.Required:
			got.Key = "required"
		case p.Value.Name == "Idempotency-Key":
			got.Key = "optional"
		case p.Value.Name == "If-Match":
			got.IfMatch = p.Value.Required
		}
	}
	return got
}

func conformOperations(c *conformance) {
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/metrics", "/openapi.yaml", "/docs"} {
		c.want(c.do("GET", p, "", nil), 200, "")
	}
}

// conformProducts covers the product operations and returns a product with
// plenty of stock.
func conformProducts(c *conformance, staff, customer string) string {
	create := func(body any, headers ...string) *httpkit.Response {
		return c.do("POST", "/v1/products", staff, body, headers...)
	}
	mug := map[string]any{"sku": "MUG-1", "name": "Mug", "price_cents": 900, "stock": 100}
	created := c.want(create(mug, "Idempotency-Key", "mug"), 201, "")
	c.want(create(mug, "Idempotency-Key", `"mug"`), 201, "")
	c.want(create(map[string]any{"sku": "MUG-2", "name": "Mug", "price_cents": 900, "stock": 1}, "Idempotency-Key", "mug"), 422, "idempotency_key_reused")
	c.want(create(mug), 409, "sku_taken")
	c.want(create(map[string]any{"sku": "", "name": "", "price_cents": -1, "stock": -1}), 422, "validation_failed")
	c.want(create(`{"sku":"X","bogus":1}`), 400, "malformed_request")
	c.want(create(mug, "Idempotency-Key", strings.Repeat("k", 300)), 400, "invalid_idempotency_key")
	c.want(create(`{"name":"`+strings.Repeat("x", 1<<20)+`"}`), 413, "payload_too_large")
	c.want(c.do("POST", "/v1/products", customer, mug), 403, "forbidden")
	c.want(c.do("POST", "/v1/products", "", mug), 401, "unauthenticated")
	pid := created.String("id")
	path := "/v1/products/" + pid

	c.want(c.do("GET", "/v1/products", customer, nil), 200, "")
	page := c.want(c.do("GET", "/v1/products?limit=1", customer, nil), 200, "")
	if cur, _ := page.JSON["next_cursor"].(string); cur != "" {
		c.t.Errorf("one product, limit 1: next_cursor %q", cur)
	}
	create(map[string]any{"sku": "MUG-3", "name": "Mug 3", "price_cents": 100, "stock": 5})
	page = c.want(c.do("GET", "/v1/products?limit=1", customer, nil), 200, "")
	cur, _ := page.JSON["next_cursor"].(string)
	c.want(c.do("GET", "/v1/products?limit=1&cursor="+cur, customer, nil), 200, "")
	c.want(c.do("GET", "/v1/products?limit=500", customer, nil), 422, "validation_failed")
	c.want(c.do("GET", "/v1/products", "nope", nil), 401, "unauthenticated")

	got := c.want(c.do("GET", path, customer, nil), 200, "")
	c.want(c.do("GET", path, customer, nil, "If-None-Match", got.Header.Get("ETag")), 304, "")
	c.want(c.do("GET", "/v1/products/"+uuid.NewString(), customer, nil), 404, "not_found")

	patch := map[string]any{"name": "Enamel mug"}
	c.want(c.do("PATCH", path, staff, patch), 428, "precondition_required")
	c.want(c.do("PATCH", path, staff, patch, "If-Match", `"v9"`), 409, "version_conflict")
	c.want(c.do("PATCH", path, staff, map[string]any{"name": ""}, "If-Match", `"v1"`), 422, "validation_failed")
	c.want(c.do("PATCH", path, staff, map[string]any{"sku": "NEW"}, "If-Match", `"v1"`), 400, "malformed_request")
	c.want(c.do("PATCH", path, customer, patch, "If-Match", `"v1"`), 403, "forbidden")
	c.want(c.do("PATCH", "/v1/products/"+uuid.NewString(), staff, patch, "If-Match", `"v1"`), 404, "not_found")
	c.want(c.do("PATCH", path, staff, patch, "If-Match", `"v1"`, "Idempotency-Key", "rename"), 200, "")
	c.want(c.do("PATCH", path, staff, patch, "If-Match", `"v1"`, "Idempotency-Key", "rename"), 200, "")

	adj := func(token string, body any, headers ...string) *httpkit.Response {
		return c.do("POST", adjustPath(pid), token, body, headers...)
	}
	c.want(adj(staff, map[string]any{"delta": 10, "reason": "delivery"}, "Idempotency-Key", "d1"), 201, "")
	c.want(adj(staff, map[string]any{"delta": 10, "reason": "delivery"}, "Idempotency-Key", "d1"), 201, "")
	c.want(adj(staff, map[string]any{"delta": 11, "reason": "delivery"}, "Idempotency-Key", "d1"), 422, "idempotency_key_reused")
	c.want(adj(staff, map[string]any{"delta": -1000, "reason": "loss"}, "Idempotency-Key", "d2"), 409, "insufficient_stock")
	c.want(adj(staff, map[string]any{"delta": 0, "reason": "none"}, "Idempotency-Key", "d3"), 422, "validation_failed")
	c.want(adj(staff, map[string]any{"delta": 1, "reason": "x"}), 400, "idempotency_key_required")
	c.want(adj(staff, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", `"unterminated`), 400, "invalid_idempotency_key")
	c.want(adj(customer, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "d4"), 403, "forbidden")
	c.want(c.do("POST", adjustPath(uuid.NewString()), staff, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "d5"), 404, "not_found")

	// The stock level: its own ETag; adjustments left the product's alone.
	level := c.want(c.do("GET", path+"/stock", customer, nil), 200, "")
	if level.Int("stock") != 110 {
		c.t.Errorf("stock level after +10: %s", level.Body)
	}
	c.want(c.do("GET", path+"/stock", customer, nil, "If-None-Match", level.Header.Get("ETag")), 304, "")
	c.want(c.do("GET", "/v1/products/"+uuid.NewString()+"/stock", customer, nil), 404, "not_found")
	c.want(c.do("GET", path+"/stock", "", nil), 401, "unauthenticated")
	c.want(c.do("PATCH", path, staff, map[string]any{"price_cents": 950}, "If-Match", `"v2"`), 200, "")
	c.want(c.do("GET", "/v1/stock", customer, nil), 200, "")
	stockPage := c.want(c.do("GET", "/v1/stock?limit=1", customer, nil), 200, "")
	if cur, _ := stockPage.JSON["next_cursor"].(string); cur == "" {
		c.t.Errorf("two stock levels, limit 1: no next_cursor")
	} else {
		c.want(c.do("GET", "/v1/stock?limit=1&cursor="+cur, customer, nil), 200, "")
	}
	c.want(c.do("GET", "/v1/stock?limit=0", customer, nil), 422, "validation_failed")
	c.want(c.do("GET", "/v1/stock", "nope", nil), 401, "unauthenticated")
	return pid
}

func conformOrders(c *conformance, staff, alice, bob, pid string) {
	line := testkit.Line
	place := func(token, key string, lines ...testkit.OrderLine) *httpkit.Response {
		return c.do("POST", "/v1/orders", token, map[string]any{"lines": lines}, "Idempotency-Key", key)
	}
	order := c.want(place(alice, "o1", line(pid, 2)), 201, "")
	c.want(place(alice, "o1", line(pid, 2)), 201, "")
	c.want(place(alice, "o1", line(pid, 3)), 422, "idempotency_key_reused")
	c.want(place(alice, "o2", line(pid, 10_000)), 422, "validation_failed")
	c.want(place(alice, "o3", line(pid, 1000)), 409, "insufficient_stock")
	c.want(place(alice, "o4", line(uuid.NewString(), 1)), 422, "validation_failed")
	c.want(place(alice, "o5", line(pid, 60)), 422, "credit_limit_exceeded")
	c.want(place(staff, "o6", line(pid, 1)), 403, "forbidden")
	c.want(c.do("POST", "/v1/orders", alice, map[string]any{"lines": []any{line(pid, 1)}}), 400, "idempotency_key_required")
	oid := order.String("id")
	opath := "/v1/orders/" + oid

	c.want(c.do("GET", "/v1/orders", alice, nil), 200, "")
	c.want(c.do("GET", "/v1/orders?limit=1", staff, nil), 200, "")
	c.want(c.do("GET", "/v1/orders?cursor=not-a-cursor", staff, nil), 422, "validation_failed")
	got := c.want(c.do("GET", opath, alice, nil), 200, "")
	c.want(c.do("GET", opath, alice, nil, "If-None-Match", got.Header.Get("ETag")), 304, "")
	c.want(c.do("GET", opath, bob, nil), 404, "not_found")
	c.want(c.do("GET", opath, staff, nil), 200, "")

	pay := func(token, key string, amount int) *httpkit.Response {
		return c.do("POST", opath+"/payments", token, map[string]any{"amount_cents": amount}, "Idempotency-Key", key)
	}
	c.want(pay(alice, "p1", 100), 201, "")
	c.want(pay(alice, "p1", 100), 201, "")
	c.want(pay(alice, "p2", 1_000_000), 409, "overpayment")
	c.want(pay(alice, "p3", 0), 422, "validation_failed")
	c.want(pay(bob, "p4", 1), 404, "not_found")
	c.want(c.do("POST", opath+"/payments", alice, map[string]any{"amount_cents": 1}), 400, "idempotency_key_required")

	// The paid order can be shipped.
	c.want(c.do("POST", opath+"/ship", alice, nil, "If-Match", `"v2"`), 403, "forbidden")
	c.want(c.do("POST", opath+"/ship", staff, nil), 428, "precondition_required")
	c.want(c.do("POST", opath+"/ship", staff, nil, "If-Match", `"v1"`), 409, "version_conflict")
	c.want(c.do("POST", opath+"/ship", staff, `{"carrier":"x"}`, "If-Match", `"v2"`), 400, "malformed_request")
	c.want(c.do("POST", opath+"/ship", staff, nil, "If-Match", `"v2"`, "Idempotency-Key", "ship-1"), 200, "")
	c.want(c.do("POST", opath+"/ship", staff, nil, "If-Match", `"v2"`, "Idempotency-Key", "ship-1"), 200, "")
	c.want(c.do("POST", opath+"/ship", staff, nil, "If-Match", `"v3"`), 409, "invalid_transition")
	c.want(c.do("POST", "/v1/orders/"+uuid.NewString()+"/ship", staff, nil, "If-Match", `"v1"`), 404, "not_found")

	// A second order is cancelled, then takes no payment.
	second := c.want(place(alice, "o7", line(pid, 1)), 201, "")
	spath := "/v1/orders/" + second.String("id")
	c.want(c.do("POST", spath+"/cancel", alice, nil), 428, "precondition_required")
	c.want(c.do("POST", spath+"/cancel", bob, nil, "If-Match", `"v1"`), 404, "not_found")
	c.want(c.do("POST", spath+"/cancel", alice, nil, "If-Match", `"v1"`, "Idempotency-Key", "c1"), 200, "")
	c.want(c.do("POST", spath+"/cancel", alice, nil, "If-Match", `"v1"`, "Idempotency-Key", "c1"), 200, "")
	c.want(c.do("POST", spath+"/cancel", alice, nil, "If-Match", `"v2"`, "Idempotency-Key", "c2"), 409, "invalid_transition")
	c.want(c.do("POST", spath+"/cancel", alice, nil, "If-Match", `"v1"`, "Idempotency-Key", "c1", "X-Ignored", "1"), 200, "")
	c.want(c.do("POST", spath+"/cancel", alice, "{}", "If-Match", `"v1"`, "Idempotency-Key", "c1"), 200, "")
	c.want(c.do("POST", spath+"/cancel", alice, nil, "If-Match", `"v1"`, "Idempotency-Key", `"c1`), 400, "invalid_idempotency_key")
	c.want(c.do("POST", spath+"/payments", staff, map[string]any{"amount_cents": 1}, "Idempotency-Key", "p5"), 409, "invalid_transition")

}

func conformActors(c *conformance, staff string, bob testkit.Actor) {
	path := "/v1/actors/" + bob.ID + "/deactivate"
	c.want(c.do("POST", path, bob.Token, nil), 403, "forbidden")
	c.want(c.do("POST", path, staff, nil, "Idempotency-Key", "bye-bob"), 200, "")
	c.want(c.do("POST", path, staff, nil, "Idempotency-Key", "bye-bob"), 200, "")
	c.want(c.do("GET", "/v1/orders", bob.Token, nil), 401, "unauthenticated")
	c.want(c.do("POST", "/v1/actors/"+uuid.NewString()+"/deactivate", staff, nil), 404, "not_found")
	c.want(c.do("POST", "/v1/actors/"+c.e.Staff.ID+"/deactivate", staff, nil), 409, "last_staff")
	c.want(c.do("POST", path, staff, `{"reason":"x"}`), 400, "malformed_request")
}

func conformOffDocument(c *conformance, staff string) {
	c.want(c.offDocument("GET", "/nope", ""), 404, "not_found")
	c.want(c.offDocument("GET", "/v1/nope", staff), 404, "not_found")
	c.want(c.offDocument("DELETE", "/v1/products/"+uuid.NewString(), staff), 405, "method_not_allowed")
	c.want(c.offDocument("POST", "/healthz", ""), 405, "method_not_allowed")
}

// checkExamples fails unless every operation of the document gave a
// document-valid success answer.
func (c *conformance) checkExamples() {
	c.t.Helper()
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !slices.ContainsFunc(c.valid[op.OperationID], func(s int) bool { return s >= 200 && s < 300 }) {
				c.t.Errorf("operation %s (%s %s) never answered a success the document allows (answers %v)",
					op.OperationID, method, path, c.valid[op.OperationID])
			}
		}
	}
	c.t.Logf("%d operations answered; problem codes %v", len(c.valid), c.codes)
}

// checkCodes fails unless every problem code seen is one the document lists.
func (c *conformance) checkCodes() {
	c.t.Helper()
	var enum []string
	for _, v := range c.doc.Components.Schemas["ProblemCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	for code := range c.codes {
		if !slices.Contains(enum, code) {
			c.t.Errorf("the server answered problem code %q, which ProblemCode does not list", code)
		}
	}
}
