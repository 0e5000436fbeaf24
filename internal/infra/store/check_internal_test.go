package store

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// TestChecksAreTheGeneratedCheckMethods: every generated method named
// Check… is a check of `api check` (one text column, no parameter or the
// retention), each its own kind, named after it; a Check… method of
// another signature fails here, and Check returns it as an error, instead
// of being skipped.
func TestChecksAreTheGeneratedCheckMethods(t *testing.T) {
	t.Parallel()
	checks, err := checksOf(dbsqlc.New())
	if err != nil {
		t.Fatalf("the generated queries: %v", err)
	}
	var kinds []string
	for _, c := range checks {
		kinds = append(kinds, c.kind)
	}
	statements := 0
	files, _ := filepath.Glob("../../../db/queries/*.sql")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		statements += len(regexp.MustCompile(`(?m)^-- name: Check[A-Z]\w* `).FindAll(b, -1))
	}
	if statements == 0 || len(kinds) != statements || !slices.IsSorted(kinds) || len(slices.Compact(slices.Clone(kinds))) != len(kinds) {
		t.Errorf("kinds %v: want one per Check… statement of db/queries (%d), sorted, each once", kinds, statements)
	}
	for _, want := range []string{"balance", "negative_stock", "paid", "order_event"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("kinds %v: no %q", kinds, want)
		}
	}

	// The one parameter a check may take is the retention: a string
	// parameter of another name would be given it all the same.
	for name, params := range generatedCheckParams(t) {
		if len(params) > 2 && (len(params) != 3 || params[2] != "retention") {
			t.Errorf("%s takes %v: a check takes (ctx, db) or (ctx, db, retention)", name, params)
		}
	}

	_, err = checksOf(wrongChecks{})
	if err == nil || !strings.Contains(err.Error(), "CheckTypo") {
		t.Errorf("a Check method of another signature gave %v, want an error naming CheckTypo", err)
	}
	found, err := checksOf(rightChecks{})
	if err != nil || len(found) != 2 || found[0].kind != "negative_stock" || found[1].kind != "order_event" {
		t.Errorf("checksOf(rightChecks) = %v, %v: want negative_stock and order_event", found, err)
	}
}

type rightChecks struct{}

func (rightChecks) CheckNegativeStock(context.Context, dbsqlc.DBTX) ([]string, error) {
	return nil, nil
}
func (rightChecks) CheckOrderEvent(context.Context, dbsqlc.DBTX, string) ([]string, error) {
	return nil, nil
}
func (rightChecks) Other(context.Context, dbsqlc.DBTX) (int64, error) { return 0, nil }

type wrongChecks struct{ rightChecks }

func (wrongChecks) CheckTypo(context.Context, dbsqlc.DBTX) (int64, error) { return 0, nil }

// generatedCheckParams reads the parameter names of every generated
// method named Check….
func generatedCheckParams(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("../dbsqlc/*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated query files: %v", err)
	}
	out := map[string][]string{}
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !isCheckName(fd.Name.Name) {
				continue
			}
			var names []string
			for _, p := range fd.Type.Params.List {
				for _, n := range p.Names {
					names = append(names, n.Name)
				}
			}
			out[fd.Name.Name] = names
		}
	}
	return out
}

func isCheckName(name string) bool {
	_, ok := CheckKind(name)
	return ok
}
