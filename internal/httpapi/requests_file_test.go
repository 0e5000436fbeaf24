package httpapi_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
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
