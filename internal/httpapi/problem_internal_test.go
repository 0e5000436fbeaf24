package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestProblemFor: every kind of error maps to its one status and code;
// caller-caused errors keep their safe detail, everything else is a 500 or
// 503 that says nothing of the cause.
func TestProblemFor(t *testing.T) {
	t.Parallel()
	secret := `ERROR: duplicate key value violates unique constraint "secret_idx" (SQLSTATE 23505) SELECT password FROM actors`
	pgErr := &pgconn.PgError{Code: "40001", Message: secret}
	stock := &domain.InsufficientStockError{ProductID: uuid.MustParse("0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0001"), Requested: 3, Available: 1}
	validation := &domain.Error{Code: domain.CodeValidation, Detail: "bad", Fields: []domain.FieldError{{Field: "lines[0].quantity", Message: "must be between 1 and 1000"}}}
	cases := []struct {
		name       string
		err        error
		status     int
		code       domain.Code
		retryAfter string
		detail     string // a substring the detail must hold; "" for no check
	}{
		{"insufficient stock", stock, 409, "insufficient_stock", "", stock.ProductID.String()},
		{"wrapped insufficient stock", fmt.Errorf("place order: %w", stock), 409, "insufficient_stock", "", "1 in stock"},
		{"validation", validation, 422, "validation_failed", "", "bad"},
		{"not found", domain.ErrNotFound, 404, "not_found", "", ""},
		{"version conflict", fmt.Errorf("update: %w", domain.ErrVersionConflict), 409, "version_conflict", "", ""},
		{"sku taken", domain.Errorf(domain.CodeSKUTaken, "taken"), 409, "sku_taken", "", "taken"},
		{"stock check constraint", domain.Errorf(domain.CodeInsufficientStock, "not enough stock"), 409, "insufficient_stock", "", ""},
		{"credit limit", domain.Errorf(domain.CodeCreditLimitExceeded, "over"), 422, "credit_limit_exceeded", "", ""},
		{"invalid transition", domain.Errorf(domain.CodeInvalidTransition, "shipped"), 409, "invalid_transition", "", ""},
		{"overpayment", domain.Errorf(domain.CodeOverpayment, "too much"), 409, "overpayment", "", ""},
		{"last staff", domain.Errorf(domain.CodeLastStaff, "last"), 409, "last_staff", "", ""},
		{"forbidden", domain.Errorf(domain.CodeForbidden, "no"), 403, "forbidden", "", ""},
		{"unauthenticated", app.ErrUnauthenticated, 401, "unauthenticated", "", ""},
		{"key reused", fmt.Errorf("claim: %w", app.ErrKeyReused), 422, "idempotency_key_reused", "", ""},
		{"key in progress", &app.KeyInProgressError{RetryAfter: 2500 * time.Millisecond}, 409, "idempotency_in_progress", "2", ""},
		{"key in progress, no hint", &app.KeyInProgressError{}, 409, "idempotency_in_progress", "1", ""},
		{"unavailable", errors.Join(app.ErrUnavailable, pgErr), 503, "unavailable", "1", ""},
		{"driver error", pgErr, 500, "internal", "", ""},
		{"plain error", errors.New(secret), 500, "internal", "", ""},
		{"cancelled", context.Canceled, 500, "internal", "", ""},
		{"request deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), 503, "unavailable", "1", "in time"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := problemFor(c.err)
			if p.Status != c.status || p.Code != c.code {
				t.Fatalf("problemFor = %d %s, want %d %s", p.Status, p.Code, c.status, c.code)
			}
			if p.Type != "urn:ordersvc:problem:"+string(c.code) || p.Title == "" || p.Detail == "" {
				t.Errorf("incomplete problem %+v", p)
			}
			if got := p.header["Retry-After"]; got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
			if !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q lacks %q", p.Detail, c.detail)
			}
			if p.Status >= 500 && (strings.Contains(p.Detail, "secret") || strings.Contains(p.Detail, "SQLSTATE") || strings.Contains(p.Detail, "password")) {
				t.Errorf("a %d detail carries internals: %q", p.Status, p.Detail)
			}
			if (len(p.Errors) > 0) != (c.code == "validation_failed") {
				t.Errorf("errors %v on a %s problem", p.Errors, c.code)
			}
		})
	}
}

// TestEveryCodeHasAStatusAndIsDocumented: every code that internal/domain
// declares (each Code constant in its source, found there, not listed
// here: a rule's code sits beside the rule) is in the OpenAPI document's
// ProblemCode enum, which lists no other, and the enum's description gives
// each the status it answers (its row of statusOf, or the default 409).
// statusOf has rows for declared codes only, and none that repeats the
// default. A code declared twice (two constants, one value) fails too.
func TestEveryCodeHasAStatusAndIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["ProblemCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("no ProblemCode schema")
	}
	var documented []domain.Code
	for _, v := range ref.Value.Enum {
		documented = append(documented, domain.Code(v.(string)))
	}
	slices.Sort(documented)
	declared := declaredCodes(t, filepath.Join("..", "domain"))
	if len(declared) < 10 { // the service answers more than twenty codes: fewer means the search went wrong
		t.Fatalf("found %d codes in internal/domain: %v", len(declared), declared)
	}
	if c := slices.Compact(slices.Clone(declared)); len(c) != len(declared) {
		t.Errorf("a code is declared twice: %v", declared)
	}
	for c, a := range statusOf {
		if !slices.Contains(declared, c) {
			t.Errorf("statusOf has a row for %s, which internal/domain does not declare", c)
		}
		if a == defaultAnswer(c) {
			t.Errorf("statusOf's row for %s repeats the default (%d %q): remove it", c, a.status, a.title)
		}
	}
	statuses := map[domain.Code]int{}
	for _, m := range regexp.MustCompile("`([a-z_]+)` ([0-9]{3})").FindAllStringSubmatch(ref.Value.Description, -1) {
		statuses[domain.Code(m[1])], _ = strconv.Atoi(m[2])
	}
	for _, c := range declared {
		if a := answerOf(c); a.status < 400 || a.title == "" || statuses[c] != a.status {
			t.Errorf("code %s answers %d %q; the ProblemCode description says %d", c, a.status, a.title, statuses[c])
		}
	}
	if !slices.Equal(documented, declared) {
		t.Errorf("ProblemCode enum %v\ndeclared codes   %v", documented, declared)
	}
}

// TestCodesAreNamedConstants: every code the service answers is one of the
// Code constants that the test above finds. In the source of internal/ and
// cmd/, no Errorf, problem or answerOf is given a string literal as its
// code, no Error{Code: …} or Problem{Code: …} literal and no assignment to
// a .Code holds one, no Code("…") conversion is written outside the
// constants of internal/domain, and no other package declares a constant
// of type Code: each would compile (an untyped string is a Code) and answer
// the default 409 under a code that nobody declared or documented. The
// check reads the syntax, not the types: a literal that reaches a Code
// through a variable or a return of another type is not seen.
func TestCodesAreNamedConstants(t *testing.T) {
	t.Parallel()
	var found []string
	visited := map[string]bool{}
	for _, root := range []string{"..", filepath.Join("..", "..", "cmd")} {
		found = append(found, literalCodesIn(t, root, visited)...)
	}
	for _, dir := range []string{filepath.Join("..", "domain"), filepath.Join("..", "app"), filepath.Join("..", "httpapi")} {
		if !visited[dir] {
			t.Fatalf("the search did not read %s: it went wrong", dir)
		}
	}
	if len(found) > 0 {
		t.Errorf("codes written as literals, not as the Code constants of internal/domain:\n%s", strings.Join(found, "\n"))
	}
}

// literalCodesIn walks the packages below root and returns where each
// writes a code as a literal (literalCode), marking each directory read in
// visited.
func literalCodesIn(t *testing.T, root string, visited map[string]bool) []string {
	t.Helper()
	var found []string
	domainDir := filepath.Join("..", "domain")
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		src, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if !slices.ContainsFunc(src, func(p string) bool { return !strings.HasSuffix(p, "_test.go") }) {
			return nil
		}
		visited[filepath.Clean(dir)] = true
		for path, f := range testkit.SourceFiles(t, dir) {
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					if codes := declaredIn(t, path, g); len(codes) > 0 {
						found = append(found, fmt.Sprintf("%s: Code variables %v", path, codes))
					}
				}
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
					if filepath.Clean(dir) == domainDir {
						continue // where the codes are declared
					}
					if codes := declaredIn(t, path, g); len(codes) > 0 {
						found = append(found, fmt.Sprintf("%s: Code constants %v outside internal/domain", path, codes))
					}
					continue
				}
				ast.Inspect(decl, func(n ast.Node) bool {
					if literalCode(n) {
						found = append(found, fmt.Sprintf("%s: %s", path, nodeString(n)))
					}
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// nodeString prints an expression or an assignment found by literalCode.
func nodeString(n ast.Node) string {
	if a, ok := n.(*ast.AssignStmt); ok {
		return types.ExprString(a.Lhs[0]) + " = " + types.ExprString(a.Rhs[0])
	}
	return types.ExprString(n.(ast.Expr))
}

// TestMalformedCodesAreInternal: the codes wellFormed refuses answer 500
// internal, whatever they are; the fuzz target compares with wellFormed
// itself, so these are checked by value.
func TestMalformedCodesAreInternal(t *testing.T) {
	t.Parallel()
	for _, c := range []domain.Code{"", "\xff", "Upper_case", "9lives", "has space", "x-y", domain.Code(strings.Repeat("a", 65))} {
		p := problem(c, "a detail")
		if p.Status != http.StatusInternalServerError || p.Code != domain.CodeInternal {
			t.Errorf("code %q: %d %s, want 500 internal", c, p.Status, p.Code)
		}
	}
	for _, c := range []domain.Code{"a", "over_refund", "x9_y", domain.Code(strings.Repeat("a", 64))} {
		if p := problem(c, "a detail"); p.Status != http.StatusConflict || p.Code != c {
			t.Errorf("code %q: %d %s, want the default 409", c, p.Status, p.Code)
		}
	}
}

// literalCode says whether n gives a code as a literal: Code("x"), a string
// literal as the code argument of Errorf, problem or answerOf, as the Code
// of an Error or Problem literal, or assigned to a .Code.
func literalCode(n ast.Node) bool {
	isString := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		return ok && lit.Kind == token.STRING
	}
	switch e := n.(type) {
	case *ast.AssignStmt:
		if len(e.Lhs) != 1 || len(e.Rhs) != 1 {
			return false
		}
		sel, ok := e.Lhs[0].(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Code" && isString(e.Rhs[0])
	case *ast.CallExpr:
		if len(e.Args) == 0 || !isString(e.Args[0]) {
			return false
		}
		name := calledName(e.Fun)
		return name == "Code" || name == "Errorf" || name == "problem" || name == "answerOf"
	case *ast.CompositeLit:
		if name := calledName(e.Type); name != "Error" && name != "Problem" {
			return false
		}
		for _, el := range e.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok && calledName(kv.Key) == "Code" && isString(kv.Value) {
				return true
			}
		}
	}
	return false
}

// calledName is the name e gives when it names something of internal/domain
// or of this package (Code, domain.Code), and "" for another package's
// (fmt.Errorf).
func calledName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "domain" {
			return e.Sel.Name
		}
	}
	return ""
}

// declaredIn returns the values of type Code that g, a const (or var)
// declaration of the file at path, declares.
func declaredIn(t *testing.T, path string, g *ast.GenDecl) []string {
	t.Helper()
	var out []string
	for _, spec := range g.Specs {
		v := spec.(*ast.ValueSpec)
		for _, val := range v.Values {
			if lit, ok := codeLiteral(v.Type, val); ok {
				c, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// declaredCodes returns, sorted, the value of every constant of type Code
// declared in the non-test files of dir, written const CodeX Code = "x" or
// const CodeX = Code("x").
func declaredCodes(t *testing.T, dir string) []domain.Code {
	t.Helper()
	var out []domain.Code
	for path, f := range testkit.SourceFiles(t, dir) {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, c := range declaredIn(t, path, g) {
					out = append(out, domain.Code(c))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// codeLiteral is the string literal of a constant of type Code: the value
// of a spec typed Code, or the argument of a conversion Code("x").
func codeLiteral(typ, val ast.Expr) (*ast.BasicLit, bool) {
	if call, ok := val.(*ast.CallExpr); ok && typ == nil && isCode(call.Fun) && len(call.Args) == 1 {
		val = call.Args[0]
	} else if !isCode(typ) {
		return nil, false
	}
	lit, ok := val.(*ast.BasicLit)
	return lit, ok && lit.Kind == token.STRING
}

// isCode says whether e names the type Code (Code, domain.Code).
func isCode(e ast.Expr) bool { return calledName(e) == "Code" }

// testServer is a Server with no database behind it, for the boundary pieces
// that need none. Its log goes to the returned buffer.
func testServer(t *testing.T) (*Server, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s := NewServer(Deps{
		Log:      slog.New(slog.NewTextHandler(&logs, nil)),
		Registry: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return errors.New("dial tcp 10.0.0.1:5432: connection refused") },
	})
	return s, &logs
}

// recordedProblem decodes a recorded problem response strictly.
func recordedProblem(t *testing.T, rec *httptest.ResponseRecorder) Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p Problem
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	return p
}

// TestWriteErrorHidesInternals: a 500 is logged with its cause once and
// answered with nothing of it.
func TestWriteErrorHidesInternals(t *testing.T) {
	t.Parallel()
	s, logs := testServer(t)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/products", nil)
	s.writeError(rec, req, fmt.Errorf("list products: %w", errors.New(`relation "secret_table" does not exist`)))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	p := recordedProblem(t, rec)
	if p.Code != "internal" || strings.Contains(body, "secret_table") || strings.Contains(body, "relation") {
		t.Errorf("500 body carries internals: %s", body)
	}
	if n := strings.Count(logs.String(), "secret_table"); n != 1 {
		t.Errorf("the cause is logged %d times, want once:\n%s", n, logs)
	}
}

// TestPanicIsA500Problem: a panicking handler behind the server's own
// middleware answers a 500 problem with the request id and no internals.
func TestPanicIsA500Problem(t *testing.T) {
	t.Parallel()
	s, logs := testServer(t)
	h := withRequestID(s.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("SELECT password FROM actors: secret")
	})))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/boom", nil)
	req.Header.Set("X-Request-Id", "req-panic-1")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	body := rec.Body.String()
	p := recordedProblem(t, rec)
	if p.Code != "internal" || p.Status != 500 || p.RequestID != "req-panic-1" {
		t.Errorf("problem %+v", p)
	}
	if strings.Contains(body, "password") || strings.Contains(body, "secret") || strings.Contains(body, "goroutine") {
		t.Errorf("500 body carries internals: %s", body)
	}
	if !strings.Contains(logs.String(), "panic serving request") {
		t.Errorf("the panic was not logged:\n%s", logs)
	}
}

// TestReadyzWithoutDatabase: /readyz is 503 unavailable, without the cause,
// while /healthz and /livez stay 200.
func TestReadyzWithoutDatabase(t *testing.T) {
	t.Parallel()
	s, _ := testServer(t)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d, want 503", rec.Code)
	}
	body := rec.Body.String()
	if p := recordedProblem(t, rec); p.Code != "unavailable" || strings.Contains(body, "10.0.0.1") {
		t.Errorf("/readyz problem %s", body)
	}
	for _, p := range []string{"/healthz", "/livez"} {
		rec = httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s %d, want 200", p, rec.Code)
		}
	}
}

// TestEvery503CarriesRetryAfter: whichever way a 503 comes about (a
// readiness probe, an unavailable database behind a use case, a problem
// built directly), it carries Retry-After.
func TestEvery503CarriesRetryAfter(t *testing.T) {
	t.Parallel()
	s, _ := testServer(t)
	answers := map[string]*httptest.ResponseRecorder{}

	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	answers["readyz"] = rec

	rec = httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest("GET", "/v1/products", nil), errors.Join(app.ErrUnavailable, errors.New("dial tcp: refused")))
	answers["unavailable database"] = rec

	rec = httptest.NewRecorder()
	s.writeProblem(rec, httptest.NewRequest("GET", "/v1/products", nil), problem(domain.CodeUnavailable, "busy"))
	answers["direct problem"] = rec

	for name, rec := range answers {
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want 503", name, rec.Code)
			continue
		}
		if v := rec.Header().Get("Retry-After"); v == "" {
			t.Errorf("%s: 503 without Retry-After", name)
		}
	}
}
