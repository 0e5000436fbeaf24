package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// seqScanAllowed lists the queries that may scan a whole table, and why.
// The statements of api check, every query named Check… (store.Check runs
// them all), are allowed apart: an operator's command that reads whole
// tables by design.
var seqScanAllowed = map[string]string{
	"SessionsByApplication": "api migrate up, before a contract migration, reads pg_stat_activity (a view over shared memory, joined to the few rows of pg_database)",
}

// TestEveryQueryUsesAnIndex plans every sqlc query (read from the generated
// code, so that no query can be added without being checked) against tables
// filled with enough rows that a sequential scan would be the planner's
// honest choice if no index fitted, and fails on any Seq Scan. It uses the
// generic plan, the one a prepared statement gets whatever its parameters,
// and the only one the service's transactions and reads run: GuardsSet sets
// plan_cache_mode to force_generic_plan in each (docs/fast-path.md #14).
func TestEveryQueryUsesAnIndex(t *testing.T) {
	t.Parallel()
	queries := generatedQueries(t)
	if len(queries) < 20 {
		t.Fatalf("found only %d queries in the generated code", len(queries))
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testkit.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		`INSERT INTO actors (id, name, role, credit_limit_cents)
		 SELECT gen_random_uuid(), 'actor ' || i, CASE WHEN i % 50 = 0 THEN 'staff' ELSE 'customer' END, 100000
		 FROM generate_series(1, 2000) i`,
		`INSERT INTO api_tokens (token_hash, actor_id) SELECT sha256(id::text::bytea), id FROM actors`,
		`INSERT INTO products (id, sku, name, price_cents)
		 SELECT gen_random_uuid(), 'SKU-' || i, 'product ' || i, 100 FROM generate_series(1, 20000) i`,
		`INSERT INTO stock_levels (product_id, stock) SELECT id, 1000 FROM products`,
		`INSERT INTO orders (id, customer_id, status, total_cents)
		 SELECT gen_random_uuid(), a.id, (ARRAY['placed','shipped','cancelled'])[1 + i % 3], 100
		 FROM generate_series(1, 20) i CROSS JOIN (SELECT id FROM actors WHERE role = 'customer') a`,
		`INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
		 SELECT o.id, 1, p.ids[1 + abs(hashtext(o.id::text)) % 20000], 1, 100
		 FROM orders o, (SELECT array_agg(id) AS ids FROM products) p`,
		`INSERT INTO payments (id, order_id, actor_id, amount_cents) SELECT gen_random_uuid(), id, customer_id, 1 FROM orders WHERE status = 'shipped'`,
		`INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, response_status, expires_at)
		 SELECT customer_id, 'placeOrder', id::text, sha256(id::text::bytea), 'completed', 201, now() + interval '1 day' FROM orders`,
		`INSERT INTO stock_adjustments (id, product_id, actor_id, delta, reason, stock_after)
		 SELECT gen_random_uuid(), id, (SELECT id FROM actors LIMIT 1), 1, 'seed', 1000 FROM products`,
		`INSERT INTO outbox_events (id, type, aggregate_id, payload, state, attempts, claimed_at, delivered_at)
		 SELECT gen_random_uuid(), 'order.placed', gen_random_uuid(), '{}',
		        (ARRAY['delivered','delivered','delivered','delivered','pending','claimed','dead'])[1 + i % 7],
		        1, now(), now()
		 FROM generate_series(1, 30000) i`,
		`ANALYZE`,
		`SET plan_cache_mode = force_generic_plan`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			if _, err := conn.Exec(ctx, `PREPARE q AS `+q.sql); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			defer conn.Exec(ctx, `DEALLOCATE q`)
			var nparams int
			if err := conn.QueryRow(ctx, `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'q'`).Scan(&nparams); err != nil {
				t.Fatal(err)
			}
			args := strings.TrimSuffix(strings.Repeat("NULL,", nparams), ",")
			explain := `EXPLAIN (FORMAT JSON) EXECUTE q`
			if nparams > 0 {
				explain += "(" + args + ")"
			}
			var raw []byte
			if err := conn.QueryRow(ctx, explain).Scan(&raw); err != nil {
				t.Fatalf("explain: %v", err)
			}
			var plans []struct{ Plan node }
			if err := json.Unmarshal(raw, &plans); err != nil {
				t.Fatal(err)
			}
			scans := plans[0].Plan.seqScans(nil)
			if len(scans) > 0 {
				if why, ok := seqScanAllowed[q.name]; ok {
					t.Logf("sequential scan of %v allowed: %s", scans, why)
					return
				}
				if _, ok := store.CheckKind(q.name); ok {
					t.Logf("sequential scan of %v allowed: api check, an operator's command, reads whole tables by design", scans)
					return
				}
				t.Errorf("%s scans %v sequentially; add an index or a reason to seqScanAllowed\nplan: %s", q.name, scans, raw)
			}
		})
	}
}

type node struct {
	NodeType string `json:"Node Type"`
	Relation string `json:"Relation Name"`
	Plans    []node `json:"Plans"`
}

func (n node) seqScans(acc []string) []string {
	if n.NodeType == "Seq Scan" {
		acc = append(acc, n.Relation)
	}
	for _, c := range n.Plans {
		acc = c.seqScans(acc)
	}
	return acc
}

type query struct{ name, sql string }

// generatedQueries reads the SQL constants from the sqlc output.
func generatedQueries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob("../dbsqlc/*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated query files: %v", err)
	}
	var out []query
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok {
					continue
				}
				sql, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				name := strings.TrimPrefix(strings.Fields(sql)[2], "")
				out = append(out, query{name: fmt.Sprint(name), sql: sql})
			}
		}
	}
	return out
}
