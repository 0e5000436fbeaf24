package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestContractOfEveryOperation derives the refusals every operation owes
// from its entry in the operations table and its example in requests.http,
// so that a new operation is checked without a line here. It runs the file
// once and takes each operation's last successful request as its example,
// then sends variants of it; every answer must be one the document gives
// for the operation, and every refused write must leave every table as it
// was. In the contract's order of checks (ADR 0026, keyed.go):
//   - an access rule: each role it refuses gets 403 forbidden, both for
//     the example as sent (a fresh key) and with no key, If-Match or body:
//     the role is refused before anything else is read;
//   - an {id} that is no UUID: 404 not_found, with no key, If-Match or body;
//   - a required key: the example without Idempotency-Key gets 400
//     idempotency_key_required, and so does the same with no body (the
//     key's presence is checked before the body is read);
//   - If-Match required: the example without If-Match (a fresh key) gets
//     428 precondition_required;
//   - an {id}: the example with an unknown UUID in its place (a fresh key)
//     gets 404 not_found;
//   - every route answers each method it does not serve with 405
//     method_not_allowed and an Allow header listing the methods of its
//     operations (HEAD with GET).
func TestContractOfEveryOperation(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	alice, bob := e.NewCustomer(100_000_00), e.NewCustomer(500_00)
	c := newConformance(t, e)
	vars, reqs := fileVars(t, e, alice.Token, bob.ID)
	examples := map[string]sentRequest{}
	for _, s := range runRequestsFile(t, c, vars, reqs, 1) {
		if s.res.Status >= 200 && s.res.Status < 300 {
			examples[c.operationOf(s.method, s.path)] = s
		}
	}
	c.noTrace = true
	tokens := map[string]string{"customer": alice.Token, "staff": e.Staff.Token}
	methods := map[string][]string{}
	for _, op := range httpapi.Operations() {
		methods[op.Route] = append(methods[op.Route], op.Method)
		ex, ok := examples[op.Name]
		if !ok {
			t.Errorf("%s: no successful example in requests.http", op.Name)
			continue
		}
		refusals(c, op, ex, tokens)
	}
	for route, ms := range methods {
		notAllowed(c, route, ms)
	}
	c.checkCodes()
	t.Logf("%d operations, %d routes; refusals answered %v", len(examples), len(methods), c.codes)
}

// refusals sends the variants of an operation's example that its table
// entry says are refused (TestContractOfEveryOperation).
func refusals(c *conformance, op httpapi.Operation, ex sentRequest, tokens map[string]string) {
	c.t.Helper()
	var body any
	if ex.body != "" {
		body = ex.body
	}
	fresh := func() []string { // a new key, where the operation takes one
		if op.Key == "" {
			return nil
		}
		return []string{"Idempotency-Key", uuid.NewString()}
	}
	what := func(s string) string { return op.Name + ": " + s }
	refused := false
	for role, token := range tokens {
		if !httpapi.Refuses(op.Name, role) {
			continue
		}
		refused = true
		as := append([]string{"Authorization", "Bearer " + token}, fresh()...)
		c.wantAs(what("a "+role+" sends the example"), c.do(op.Method, ex.path, "", body, ex.header(nil, as...)...), 403, "forbidden")
		c.wantAs(what("a "+role+" sends nothing else"), c.do(op.Method, pathOnly(ex.path), token, nil), 403, "forbidden")
	}
	if refused != op.Restricted {
		c.t.Errorf("%s: an access rule %v, but refuses a customer or staff %v", op.Name, op.Restricted, refused)
	}
	var auth []string
	for _, h := range ex.headers {
		if h[0] == "Authorization" {
			auth = append(auth, h[0], h[1])
		}
	}
	at, hasID := idAt(op.Route)
	if hasID {
		c.wantAs(what("an id that is no UUID"), c.do(op.Method, withID(ex.path, at, "42"), "", nil, auth...), 404, "not_found")
	}
	if op.Key == "required" {
		c.wantAs(what("the example without its key"), c.do(op.Method, ex.path, "", body, ex.header([]string{"Idempotency-Key"})...), 400, "idempotency_key_required")
		c.wantAs(what("no key, no body"), c.do(op.Method, ex.path, "", nil, auth...), 400, "idempotency_key_required")
	}
	if op.IfMatch {
		c.wantAs(what("the example without If-Match"), c.do(op.Method, ex.path, "", body, ex.header([]string{"If-Match"}, fresh()...)...), 428, "precondition_required")
	}
	if hasID {
		c.wantAs(what("the example at an unknown id"), c.do(op.Method, withID(ex.path, at, uuid.NewString()), "", body, ex.header(nil, fresh()...)...), 404, "not_found")
	}
}

// notAllowed checks the 405 of a route to each method none of its
// operations serves (of GET, DELETE, PUT, PATCH and POST), and its Allow
// header.
func notAllowed(c *conformance, route string, methods []string) {
	c.t.Helper()
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} { // the server's order
		if slices.Contains(methods, m) {
			allow = append(allow, m)
			if m == "GET" {
				allow = append(allow, "HEAD")
			}
		}
	}
	path := route
	if at, ok := idAt(route); ok {
		path = withID(route, at, uuid.NewString())
	}
	refused := 0
	for _, m := range []string{"GET", "DELETE", "PUT", "PATCH", "POST"} {
		if slices.Contains(allow, m) {
			continue
		}
		refused++
		res := c.wantAs(route+": "+m, c.offDocument(m, path, c.e.Staff.Token), http.StatusMethodNotAllowed, "method_not_allowed")
		if got, want := res.Header.Get("Allow"), strings.Join(allow, ", "); got != want {
			c.t.Errorf("%s %s: Allow %q, want %q", m, route, got, want)
		}
	}
	if refused == 0 {
		c.t.Errorf("%s serves every method", route)
	}
}

// idAt gives the index of the {id} segment of a route.
func idAt(route string) (int, bool) {
	i := slices.Index(strings.Split(route, "/"), "{id}")
	return i, i >= 0
}

// withID puts id in segment at of path, keeping its query.
func withID(path string, at int, id string) string {
	p, q, hasQuery := strings.Cut(path, "?")
	segs := strings.Split(p, "/")
	segs[at] = id
	if hasQuery {
		return strings.Join(segs, "/") + "?" + q
	}
	return strings.Join(segs, "/")
}

// pathOnly drops the query of a path.
func pathOnly(path string) string {
	p, _, _ := strings.Cut(path, "?")
	return p
}
