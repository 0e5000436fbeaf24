package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// The top-level requests.http has a request for every operation of the
// OpenAPI document, and every request in it is an operation of the document:
// an endpoint added to the document without an example request, or a request
// left behind by a removed or renamed endpoint, fails here.
func TestRequestsFileCoversEveryOperation(t *testing.T) {
	doc, err := apiDoc()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	type operation struct {
		method, path string
		pattern      *regexp.Regexp
	}
	var ops []operation
	param := regexp.MustCompile(`\\\{[^/]+?\\\}`)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, operation{method, path,
				regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`) + "$")})
		}
	}

	f, err := os.Open("../../requests.http")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	request := regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) \{\{base\}\}(\S*)(?: HTTP/\S+)?$`)
	covered := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := request.FindStringSubmatch(line)
		if m == nil {
			if regexp.MustCompile(`^[A-Z]+ `).MatchString(line) {
				t.Errorf("requests.http:%d: %q is not METHOD {{base}}/path", n, line)
			}
			continue
		}
		path, _, _ := strings.Cut(m[2], "?")
		i := slices.IndexFunc(ops, func(o operation) bool { return o.method == m[1] && o.pattern.MatchString(path) })
		if i < 0 {
			t.Errorf("requests.http:%d: %s %s is no operation of openapi.yaml", n, m[1], path)
			continue
		}
		covered[ops[i].method+" "+ops[i].path]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if covered[o.method+" "+o.path] == 0 {
			t.Errorf("requests.http has no request for %s %s: add one", o.method, o.path)
		}
	}
	t.Logf("%d operations, each with a request in requests.http", len(ops))
}

// httpFileRequest is one request of requests.http.
type httpFileRequest struct {
	line    int         // of the request line
	title   string      // the ### line
	name    string      // # @name
	want    int         // # → status
	code    string      // # → status code: the problem code a refusal promises
	members [][2]string // # → status member=value …: members the answer's body holds
	method  string
	target  string
	headers [][2]string
	body    string
}

// readRequestsFile parses requests.http as REST Client does: @name = value
// variables, then requests separated by ### lines, each with its comments,
// request line, headers, a blank line and an optional body.
func readRequestsFile(t *testing.T) (map[string]string, []httpFileRequest) {
	t.Helper()
	raw, err := os.ReadFile("../../requests.http")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	var reqs []httpFileRequest
	var cur *httpFileRequest
	inBody := false
	variable := regexp.MustCompile(`^@(\w+)\s*=\s*(.*)$`)
	for n, line := range strings.Split(string(raw), "\n") {
		n++
		switch {
		case strings.HasPrefix(line, "###"):
			if cur != nil && cur.method != "" {
				reqs = append(reqs, *cur)
			}
			if cur == nil || cur.method != "" {
				cur = &httpFileRequest{title: strings.TrimSpace(strings.TrimLeft(line, "#"))}
			}
			inBody = false
		case cur == nil:
			if m := variable.FindStringSubmatch(line); m != nil {
				vars[m[1]] = strings.TrimSpace(m[2])
			}
		case cur.method == "" && strings.HasPrefix(line, "#"):
			if strings.HasPrefix(line, "# →") {
				cur.want, cur.code, cur.members = promise(t, n, line)
			}
			if name, ok := strings.CutPrefix(line, "# @name "); ok {
				cur.name = strings.TrimSpace(name)
			}
		case cur.method == "" && strings.TrimSpace(line) != "":
			method, target, _ := strings.Cut(line, " ")
			cur.method, cur.target, cur.line = method, strings.Fields(target)[0], n
		case cur.method != "" && !inBody && strings.TrimSpace(line) == "":
			inBody = true
		case cur.method != "" && !inBody:
			k, v, _ := strings.Cut(line, ":")
			cur.headers = append(cur.headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		case inBody:
			cur.body += line + "\n"
		}
	}
	if cur != nil && cur.method != "" {
		reqs = append(reqs, *cur)
	}
	return vars, reqs
}

// promise reads a "# → status" line: the status, then for a refusal its
// problem code, then any members the answer's body holds, as
// name=value with the value as JSON writes it ("# → 201 status=\"placed\"
// total_cents=2400").
func promise(t *testing.T, n int, line string) (int, string, [][2]string) {
	t.Helper()
	m := regexp.MustCompile(`^# → (\d{3})(?: ([a-z_]+))?((?: [a-z_]+=\S+)*)\s*$`).FindStringSubmatch(line)
	if m == nil {
		t.Errorf("requests.http:%d: %q is not \"# → status [problem_code] [member=value …]\"", n, line)
		return 0, "", nil
	}
	status, _ := strconv.Atoi(m[1])
	var members [][2]string
	for _, f := range strings.Fields(m[3]) {
		k, v, _ := strings.Cut(f, "=")
		members = append(members, [2]string{k, v})
	}
	return status, m[2], members
}

// brokenPromises lists the promised members that the body does not hold
// with the promised value.
func brokenPromises(body []byte, members [][2]string) []string {
	var got map[string]json.RawMessage
	_ = json.Unmarshal(body, &got)
	var broken []string
	for _, m := range members {
		if string(got[m[0]]) != m[1] {
			broken = append(broken, fmt.Sprintf("%s is %s, promised %s", m[0], got[m[0]], m[1]))
		}
	}
	return broken
}

// sentRequest is a request of requests.http as it was sent, its references
// resolved, with its answer.
type sentRequest struct {
	httpFileRequest
	path    string      // the target without {{base}}, with its query
	headers [][2]string // resolved, Authorization included
	body    string      // resolved; "" for none
	res     *httpkit.Response
}

// header gives the headers of a sent request as Env.Do takes them, without
// those named in drop and with the values of set in their place (or added).
func (s sentRequest) header(drop []string, set ...string) []string {
	var out []string
	for _, h := range s.headers {
		replaced := false
		for i := 0; i+1 < len(set); i += 2 {
			replaced = replaced || set[i] == h[0]
		}
		if !replaced && !slices.Contains(drop, h[0]) {
			out = append(out, h[0], h[1])
		}
	}
	return append(out, set...)
}

// fileVars sets requests.http's variables for e: the server's address,
// the staff token, Alice's token and Bob's id.
func fileVars(t *testing.T, e *httpkit.Env, alice string, bob string) (map[string]string, []httpFileRequest) {
	t.Helper()
	vars, reqs := readRequestsFile(t)
	for _, v := range []string{"base", "staff", "alice", "bob_id"} {
		if _, ok := vars[v]; !ok {
			t.Fatalf("requests.http sets no @%s", v)
		}
	}
	vars["base"], vars["staff"], vars["alice"], vars["bob_id"] = e.Server.URL, e.Staff.Token, alice, bob
	if len(reqs) < 10 {
		t.Fatalf("requests.http: %d requests parsed", len(reqs))
	}
	return vars, reqs
}

// runRequestsFile sends every request of requests.http in the file's
// order through c, resolving its variables and its {{name.response...}}
// and {{name.request.headers...}} references as REST Client does, and
// checks that each answers the status, and for a refusal the problem code,
// its "# → status code" line promises. It returns the requests as sent.
func runRequestsFile(t *testing.T, c *conformance, vars map[string]string, reqs []httpFileRequest, run int) []sentRequest {
	t.Helper()
	named := map[string]sentRequest{}
	var out []sentRequest
	for _, q := range reqs {
		switch {
		case q.want == 0:
			t.Errorf("requests.http:%d (%s): no \"# → status\" line", q.line, q.title)
			continue
		case q.want >= 400 && q.code == "":
			t.Errorf("requests.http:%d (%s): a refusal names its problem code: \"# → %d code\"", q.line, q.title, q.want)
		}
		s, unresolved := resolveRequest(q, vars, named)
		if len(unresolved) > 0 {
			t.Errorf("run %d, requests.http:%d (%s): %v resolve to nothing", run, q.line, q.title, unresolved)
			continue
		}
		var body any
		if s.body != "" {
			body = s.body
		}
		c.where = fmt.Sprintf("run %d, requests.http:%d (%s): ", run, q.line, q.title)
		s.res = c.check(s.method, s.path, func() *httpkit.Response {
			res := c.e.Do(s.method, s.path, "", body, s.header(nil)...)
			if res.Err != nil {
				t.Fatalf("requests.http:%d: %v", q.line, res.Err)
			}
			c.seen(res)
			return res
		})
		if s.res.Status != q.want || (q.code != "" && s.res.Code() != q.code) {
			t.Errorf("run %d, requests.http:%d (%s): %s %s answered %d %s, the file promises %d %s",
				run, q.line, q.title, s.method, s.path, s.res.Status, s.res.Body, q.want, q.code)
		}
		if broken := brokenPromises(s.res.Body, q.members); len(broken) > 0 {
			t.Errorf("run %d, requests.http:%d (%s): %s %s answered %s: %s",
				run, q.line, q.title, s.method, s.path, bytes.TrimSpace(s.res.Body), strings.Join(broken, "; "))
		}
		if q.name != "" {
			named[q.name] = s
		}
		out = append(out, s)
	}
	c.where = ""
	return out
}

// resolveRequest fills in a request's variables and references; it lists
// those that resolve to nothing.
func resolveRequest(q httpFileRequest, vars map[string]string, named map[string]sentRequest) (sentRequest, []string) {
	var unresolved []string
	reference := regexp.MustCompile(`\{\{([^{}]+)\}\}`)
	resolve := func(s string) string {
		return reference.ReplaceAllStringFunc(s, func(ref string) string {
			name := strings.TrimSpace(ref[2 : len(ref)-2])
			if name == "$guid" {
				return uuid.NewString()
			}
			if v, ok := vars[name]; ok {
				return v
			}
			if v, ok := referenced(name, named); ok {
				return v
			}
			unresolved = append(unresolved, ref)
			return ref
		})
	}
	s := sentRequest{httpFileRequest: q, body: resolve(strings.TrimSpace(q.body))}
	s.path, _ = strings.CutPrefix(resolve(q.target), vars["base"])
	for _, h := range q.headers {
		s.headers = append(s.headers, [2]string{h[0], resolve(h[1])})
	}
	return s, unresolved
}

// referenced reads a {{name.response.headers.H}}, {{name.response.body.$.f}}
// or {{name.request.headers.H}} reference to an earlier named request.
func referenced(ref string, named map[string]sentRequest) (string, bool) {
	name, path, _ := strings.Cut(ref, ".")
	s, ok := named[name]
	if !ok {
		return "", false
	}
	if h, ok := strings.CutPrefix(path, "response.headers."); ok && s.res.Header.Get(h) != "" {
		return s.res.Header.Get(h), true
	}
	if f, ok := strings.CutPrefix(path, "response.body.$."); ok {
		v, ok := s.res.JSON[f].(string)
		return v, ok
	}
	if h, ok := strings.CutPrefix(path, "request.headers."); ok {
		for _, kv := range s.headers {
			if strings.EqualFold(kv[0], h) {
				return kv[1], true
			}
		}
	}
	return "", false
}

// TestRequestsFileRunsTopToBottom sends every request of requests.http in
// the file's order to the real service (runRequestsFile) and checks that
// each answers the status and problem code its "# → status code" line
// promises, that every answer is one openapi.yaml gives for its operation,
// that every write the service refuses with a 4xx leaves every table as it
// was, that every operation of the document answers a success there, and
// that every problem code answered is in the ProblemCode enum. It runs the
// file after the README's first calls (a product MUG-1, an order under the
// key order-42), and then once more, as someone trying it again would.
func TestRequestsFileRunsTopToBottom(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	alice := e.NewCustomer(100_000_00)
	bob := e.NewCustomer(500_00)

	readme := e.Do("POST", "/v1/products", e.Staff.Token, map[string]any{"sku": "MUG-1", "name": "Mug", "price_cents": 1200, "stock": 10})
	if readme.Status != http.StatusCreated {
		t.Fatalf("the README's product: %d %s", readme.Status, readme.Body)
	}
	if r := e.PlaceOrder(alice.Token, "order-42", testkit.Line(readme.String("id"), 2)); r.Status != http.StatusCreated {
		t.Fatalf("the README's order: %d %s", r.Status, r.Body)
	}

	c := newConformance(t, e)
	c.noTrace = true
	vars, reqs := fileVars(t, e, alice.Token, bob.ID)
	for run := 1; run <= 2; run++ {
		runRequestsFile(t, c, vars, reqs, run)
	}
	c.checkExamples()
	c.checkCodes()
	t.Logf("%d requests sent in order, twice", len(reqs))
}
