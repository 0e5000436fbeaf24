package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// BenchmarkCheck times `api check` (store.Check, every kind) on a database
// of CHECK_BENCH_ORDERS orders [1,000,000]: 10,000 customers, 1,000
// products, two lines an order, a payment on every third, and each order's
// order.placed event, all consistent, so that every statement reads its
// tables in full and finds nothing.
//
//	TEST_DATABASE_URL=… go test -run '^$' -bench BenchmarkCheck -benchtime 3x -timeout 30m ./internal/infra/
func BenchmarkCheck(b *testing.B) {
	orders := 1_000_000
	if v := os.Getenv("CHECK_BENCH_ORDERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("CHECK_BENCH_ORDERS=%q: want a positive integer", v)
		}
		orders = n
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testkit.DB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now()
	for _, stmt := range []string{
		`INSERT INTO actors (id, name, role, credit_limit_cents) VALUES (gen_random_uuid(), 'staff', 'staff', 0)`,
		`INSERT INTO actors (id, name, role, credit_limit_cents)
		 SELECT gen_random_uuid(), 'customer ' || i, 'customer', 1000000000 FROM generate_series(1, 10000) i`,
		`INSERT INTO products (id, sku, name, price_cents) SELECT gen_random_uuid(), 'SKU-' || i, 'product ' || i, 100 + i FROM generate_series(1, 1000) i`,
		`INSERT INTO stock_levels (product_id, stock) SELECT id, 1000000 FROM products`,
		`CREATE TEMP TABLE c AS SELECT row_number() OVER () AS n, id FROM actors WHERE role = 'customer'`,
		`CREATE TEMP TABLE p AS SELECT row_number() OVER () AS n, id, price_cents FROM products`,
		`CREATE TEMP TABLE o AS SELECT i, gen_random_uuid() AS id FROM generate_series(1, $1::int) i`,
		`INSERT INTO orders (id, customer_id, status, total_cents, paid_cents)
		 SELECT o.id, c.id, (ARRAY['placed','shipped','cancelled'])[1 + o.i % 3],
		        (SELECT sum((1 + o.i % 3) * p.price_cents) FROM generate_series(1, 2) l JOIN p ON p.n = 1 + (o.i * 7 + l) % 1000),
		        CASE WHEN o.i % 3 = 1 THEN 50 ELSE 0 END
		 FROM o JOIN c ON c.n = 1 + o.i % 10000`,
		`INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
		 SELECT o.id, l, p.id, 1 + o.i % 3, p.price_cents
		 FROM o CROSS JOIN generate_series(1, 2) l JOIN p ON p.n = 1 + (o.i * 7 + l) % 1000`,
		`INSERT INTO payments (id, order_id, actor_id, amount_cents) SELECT gen_random_uuid(), id, customer_id, 50 FROM orders WHERE paid_cents = 50`,
		`INSERT INTO outbox_events (id, type, aggregate_id, payload, state, delivered_at)
		 SELECT gen_random_uuid(), 'order.placed', id, '{}', 'delivered', now() FROM orders`,
		`UPDATE actors a SET balance_cents = s.owed
		 FROM (SELECT customer_id, sum(total_cents - paid_cents) AS owed FROM orders WHERE status IN ('placed', 'shipped') GROUP BY customer_id) s
		 WHERE s.customer_id = a.id`,
		`VACUUM ANALYZE`,
	} {
		args := []any{}
		if strings.HasPrefix(stmt, "CREATE TEMP TABLE o ") {
			args = append(args, orders)
		}
		if _, err := conn.Exec(ctx, stmt, args...); err != nil {
			b.Fatalf("%.60s…: %v", stmt, err)
		}
	}
	b.Logf("%d orders made in %s", orders, time.Since(start).Round(time.Second))
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		findings, err := store.Check(ctx, conn, store.CheckOptions{Retention: 168 * time.Hour})
		if err != nil || len(findings) != 0 {
			b.Fatalf("check: %v, %d findings (first: %v)", err, len(findings), findings[:min(1, len(findings))])
		}
		b.Logf("api check on %d orders: %s", orders, time.Since(t0).Round(time.Millisecond))
	}
}
