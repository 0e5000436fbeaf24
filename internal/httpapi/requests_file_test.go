package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
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
	line    int    // of the request line
	title   string // the ### line
	name    string // # @name
	want    int    // # → status
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
	status := regexp.MustCompile(`^# → (\d{3})\b`)
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
			if m := status.FindStringSubmatch(line); m != nil {
				cur.want, _ = strconv.Atoi(m[1])
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

// TestRequestsFileRunsTopToBottom sends every request of requests.http in
// the file's order to the real service, resolving its variables and its
// {{name.response...}} references as REST Client does, and checks that each
// answers the status its "# → status" comment promises. It runs the file
// after the README's first calls (a product MUG-1, an order under the key
// order-42), and then once more, as someone trying it again would.
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

	vars, reqs := readRequestsFile(t)
	for _, v := range []string{"base", "staff", "alice", "bob_id"} {
		if _, ok := vars[v]; !ok {
			t.Fatalf("requests.http sets no @%s", v)
		}
	}
	vars["base"], vars["staff"], vars["alice"], vars["bob_id"] = e.Server.URL, e.Staff.Token, alice.Token, bob.ID
	if len(reqs) < 10 {
		t.Fatalf("requests.http: %d requests parsed", len(reqs))
	}
	reference := regexp.MustCompile(`\{\{([^{}]+)\}\}`)
	for run := 1; run <= 2; run++ {
		responses := map[string]*http.Response{}
		bodies := map[string]map[string]any{}
		for _, q := range reqs {
			if q.want == 0 {
				t.Errorf("requests.http:%d (%s): no \"# → status\" line", q.line, q.title)
				continue
			}
			var unresolved []string
			resolve := func(s string) string {
				return reference.ReplaceAllStringFunc(s, func(ref string) string {
					name := strings.TrimSpace(ref[2 : len(ref)-2])
					if name == "$guid" {
						return uuid.NewString()
					}
					if v, ok := vars[name]; ok {
						return v
					}
					req, path, _ := strings.Cut(name, ".response.")
					if res, ok := responses[req]; ok {
						if h, ok := strings.CutPrefix(path, "headers."); ok && res.Header.Get(h) != "" {
							return res.Header.Get(h)
						}
						if f, ok := strings.CutPrefix(path, "body.$."); ok {
							if v, ok := bodies[req][f].(string); ok {
								return v
							}
						}
					}
					unresolved = append(unresolved, ref)
					return ref
				})
			}
			req, err := http.NewRequest(q.method, resolve(q.target), strings.NewReader(resolve(strings.TrimSpace(q.body))))
			if err != nil {
				t.Fatalf("requests.http:%d: %v", q.line, err)
			}
			for _, h := range q.headers {
				req.Header.Set(h[0], resolve(h[1]))
			}
			if len(unresolved) > 0 {
				t.Errorf("run %d, requests.http:%d (%s): %v resolve to nothing", run, q.line, q.title, unresolved)
				continue
			}
			res, err := e.Client.Do(req)
			if err != nil {
				t.Fatalf("requests.http:%d: %v", q.line, err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != q.want {
				t.Errorf("run %d, requests.http:%d (%s): %s %s answered %d %s, the file promises %d",
					run, q.line, q.title, q.method, req.URL.Path, res.StatusCode, raw, q.want)
			}
			if q.name != "" {
				var body map[string]any
				_ = json.Unmarshal(raw, &body)
				responses[q.name], bodies[q.name] = res, body
			}
		}
	}
	t.Logf("%d requests sent in order, twice, each answered as promised", len(reqs))
}
