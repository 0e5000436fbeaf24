package postgres_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every statement the service runs is typed by sqlc: its SQL text, its
// parameters and its row scan come from the generated code
// (internal/infra/dbsqlc), also when statements are batched (postgres'
// batch, ADR 0014). A hand-written scan lists the columns a second time:
// add a column to a query, regenerate, and it still compiles, then fails at
// run time ("number of field descriptions must equal number of
// destinations") or, worse, fills the wrong fields. So no hand scans and no
// hand SQL may exist, and this test reads the service's source (cmd and
// internal, without the generated code, the test kit and tests) to check it:
//
//   - a Scan call only forwards its destinations (Scan(dest...)), as a
//     pgx.Row wrapper does;
//   - the SQL handed to Exec, Query, QueryRow or a batch's Queue is a
//     variable (the text a generated method passed in), never a literal
//     or a package-level name, apart from the transaction control of the
//     runner (BEGIN, COMMIT, ROLLBACK), which is not a query;
//   - no string in the source looks like a statement;
//   - no pgx.QueuedQuery is built by hand.
//
// TestSQLCOnlyCatchesHandWrittenSQL runs the same checks on the hand
// scans and queued SQL this service used to have, and shows they fail.
func TestSQLCOnly(t *testing.T) {
	t.Parallel()
	var files int
	for _, root := range []string{"../../../cmd", "../../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "dbsqlc" || d.Name() == "testkit" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, finding := range handWrittenSQL(fset, f) {
				t.Errorf("%s (use a generated sqlc method; several in one round trip go through postgres.Batch)", finding)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 20 {
		t.Fatalf("read only %d files: wrong directory?", files)
	}
}

// The naive variant: the hand scans and hand-queued SQL that the pipelined
// statements had before they went through batch. Each must be found.
func TestSQLCOnlyCatchesHandWrittenSQL(t *testing.T) {
	t.Parallel()
	const naive = `package infra

func readPlacementLocks(br pgx.BatchResults) error {
	var credit dbsqlc.ActorLockForOrderRow
	return br.QueryRow().Scan(&credit.CreditLimitCents, &credit.BalanceCents, &credit.Active)
}

func lockForPlacement(b *pgx.Batch, customer uuid.UUID) {
	b.Queue(dbsqlc.ActorLockForOrderSQL, customer)
}

func deferred(sql string, args ...any) *pgx.QueuedQuery {
	return &pgx.QueuedQuery{SQL: sql, Arguments: args}
}

func naiveMark(ctx context.Context, pool *pgxpool.Pool, ids []uuid.UUID) error {
	_, err := pool.Exec(ctx, "UPDATE outbox_events SET state = 'delivered' WHERE id = ANY ($1)", ids)
	return err
}

const countOrders = ` + "`SELECT count(*) FROM orders`" + `
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "naive.go", naive, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := handWrittenSQL(fset, f)
	want := []string{
		"naive.go:5: hand scan",
		"naive.go:9: SQL from dbsqlc.ActorLockForOrderSQL",
		"naive.go:13: pgx.QueuedQuery built by hand",
		"naive.go:17: SQL from a literal",
		"naive.go:17: SQL text in the source",
		"naive.go:21: SQL text in the source",
	}
	if len(got) != len(want) {
		t.Fatalf("findings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("finding %d: %q, want %q…", i, got[i], want[i])
		}
	}
}

// transactionControl is the only SQL text allowed in the source: the
// runner's BEGIN, COMMIT and ROLLBACK (internal/infra/postgres/pipeline.go).
var transactionControl = map[string]bool{
	"begin isolation level read committed": true,
	"begin isolation level serializable":   true,
	"commit":                               true,
	"rollback":                             true,
}

var looksLikeSQL = regexp.MustCompile(`(?is)^\s*(select|insert|update|delete|with|lock|truncate|create|alter|drop)\s`)

// handWrittenSQL returns what in f bypasses the generated code, one
// "file:line: what" each.
func handWrittenSQL(fset *token.FileSet, f *ast.File) []string {
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		p := fset.Position(n.Pos())
		out = append(out, filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line)+": "+fmt.Sprintf(format, args...))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				break
			}
			if s, err := strconv.Unquote(n.Value); err == nil && looksLikeSQL.MatchString(s) {
				report(n, "SQL text in the source: %.40q", s)
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "QueuedQuery" {
				report(n, "pgx.QueuedQuery built by hand")
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			switch sel.Sel.Name {
			case "Scan":
				// No arguments: a bufio.Scanner, not a row.
				if len(n.Args) > 0 && (len(n.Args) != 1 || !n.Ellipsis.IsValid()) {
					report(n, "hand scan: %d destinations listed", len(n.Args))
				}
			case "Exec", "Query", "QueryRow", "Queue":
				i := 1 // after the context
				if sel.Sel.Name == "Queue" {
					i = 0
				}
				if len(n.Args) <= i {
					break
				}
				switch sql := n.Args[i].(type) {
				case *ast.Ident: // forwarded from a generated method
				case *ast.BasicLit:
					if s, err := strconv.Unquote(sql.Value); err != nil || !transactionControl[s] {
						report(n, "SQL from a literal")
					}
				case *ast.SelectorExpr:
					if x, ok := sql.X.(*ast.Ident); ok {
						report(n, "SQL from %s.%s", x.Name, sql.Sel.Name)
					} else {
						report(n, "SQL from a field")
					}
				default:
					report(n, "SQL from an expression")
				}
			}
		}
		return true
	})
	return out
}
