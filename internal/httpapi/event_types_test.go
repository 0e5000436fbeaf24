package httpapi_test

import (
	"context"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestEveryEventTypeIsAllowedAndDocumented: the event types the use cases
// declare (each EventType value in internal/app, found in the source, not
// listed here) are exactly those the outbox's CHECK allows on the migrated
// schema, those the OpenAPI document's Event.type enum lists, and those the
// table of docs/events.md describes. A type missing from the CHECK fails
// its use case's first append (a 500); one missing from the document or the
// table is an event that receivers were never told about.
func TestEveryEventTypeIsAllowedAndDocumented(t *testing.T) {
	t.Parallel()
	declared := declaredEventTypes(t, filepath.Join("..", "app"))
	if len(declared) < 5 {
		t.Fatalf("found %d event types in internal/app: %v", len(declared), declared)
	}

	doc, err := apiDoc()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	if ev := doc.Components.Schemas["Event"]; ev != nil && ev.Value.Properties["type"] != nil {
		for _, v := range ev.Value.Properties["type"].Value.Enum {
			documented = append(documented, v.(string))
		}
	}

	conn, err := pgx.Connect(context.Background(), testkit.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var check string
	if err := conn.QueryRow(context.Background(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'outbox_events_type_check' AND conrelid = 'outbox_events'::regclass`).Scan(&check); err != nil {
		t.Fatalf("the outbox's type CHECK: %v", err)
	}
	allowed := quoted(`'([a-z_.]+)'`, check)

	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	described := quoted("(?m)^\\| `([a-z_]+\\.[a-z_]+)` \\|", string(page))

	for what, got := range map[string][]string{
		"the outbox's CHECK (db/migrations)":  allowed,
		"the Event.type enum of openapi.yaml": documented,
		"the table of docs/events.md":         described,
	} {
		slices.Sort(got)
		if !slices.Equal(got, declared) {
			t.Errorf("%s lists %v; internal/app declares %v", what, got, declared)
		}
	}
}

// declaredEventTypes returns, sorted, the name of every EventType value
// written as a literal in the non-test files of dir: EventType{"x.y"}.
func declaredEventTypes(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range testkit.SourceFiles(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || len(lit.Elts) != 1 {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "EventType" {
				return true
			}
			v := lit.Elts[0]
			if kv, ok := v.(*ast.KeyValueExpr); ok {
				v = kv.Value
			}
			if s, ok := v.(*ast.BasicLit); ok && s.Kind == token.STRING {
				name, err := strconv.Unquote(s.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, name)
			}
			return true
		})
	}
	slices.Sort(out)
	return out
}

// quoted returns the first group of every match of pattern in s.
func quoted(pattern, s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
