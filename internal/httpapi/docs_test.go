package httpapi_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// GET /docs is a page whose every asset comes from this service (embedded in
// the binary): no absolute URL, and each script, style and icon it names
// answers 200 with its content type. Whether the page renders every
// operation is checked in headless Chromium by .ci/docs-check.sh.
func TestDocsPageServesItsOwnAssets(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	page := e.Do("GET", "/docs", "", nil)
	if page.Status != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs: %d %s", page.Status, page.Header.Get("Content-Type"))
	}
	body := string(page.Body)
	if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(body) {
		t.Errorf("the page loads something from elsewhere:\n%s", body)
	}
	if !strings.Contains(body, `url: "/openapi.yaml"`) {
		t.Errorf("the page does not load /openapi.yaml:\n%s", body)
	}
	refs := regexp.MustCompile(`(?:src|href)="(/docs/[^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("the page names %d assets, want the style and two scripts:\n%s", len(refs), body)
	}
	want := map[string]string{".css": "text/css", ".js": "text/javascript", ".png": "image/png"}
	for _, m := range refs {
		res := e.Do("GET", m[1], "", nil)
		ext := m[1][strings.LastIndex(m[1], "."):]
		if res.Status != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), want[ext]) || len(res.Body) == 0 {
			t.Errorf("GET %s: %d %q, %d bytes", m[1], res.Status, res.Header.Get("Content-Type"), len(res.Body))
		}
	}
	if res := e.Do("GET", "/docs/index.html", "", nil); res.Status != 404 || res.Code() != "not_found" {
		t.Errorf("GET /docs/index.html: %d %s, want 404 not_found (only the page's assets are served)", res.Status, res.Body)
	}
}
