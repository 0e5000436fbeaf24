package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestStatementsArePlannedOncePerConnection: the service's transactions and
// reads run with plan_cache_mode = force_generic_plan (GuardsSet,
// docs/fast-path.md #14), so a statement prepared on a connection is
// planned there once and then runs that generic plan. Under the default
// (auto), PostgreSQL plans StockLockRows afresh at every execution: a
// custom plan for the actual ids looks cheaper than the generic plan,
// which assumes ten of them. Naive variant: the same calls on a pool
// without the guards, caught replanning at every call.
//
// Behind PgBouncer (TEST_PGBOUNCER=1, cache_describe) statements are
// unnamed and parsed at every execution: no plan is cached per
// connection, so there is nothing to count, and the test says it is
// skipped (go test -v lists it as SKIP, with the reason).
func TestStatementsArePlannedOncePerConnection(t *testing.T) {
	if testkit.ThroughPgBouncer() {
		t.Skip("statements are unnamed behind PgBouncer (cache_describe): no plan is cached per connection to count")
	}
	t.Parallel()
	url := testkit.DB(t)
	ctx := context.Background()
	// Enough products that a custom plan for one to three ids looks
	// cheaper than the generic plan (as in the benchmark's 10,000).
	setup, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	for _, stmt := range []string{
		`INSERT INTO products (id, sku, name, price_cents)
		 SELECT gen_random_uuid(), 'SKU-' || i, 'product ' || i, 100 FROM generate_series(1, 10000) i`,
		`INSERT INTO stock_levels (product_id, stock) SELECT id, 1000 FROM products`,
		`ANALYZE`,
	} {
		if _, err := setup.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var ids []uuid.UUID
	if err := setup.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM products LIMIT 60) p`).Scan(&ids); err != nil {
		t.Fatal(err)
	}

	// One connection each, so that every call runs on the one whose
	// prepared statements are counted.
	guarded, err := postgres.NewPool(ctx, postgres.PoolConfig{
		URL: url, MaxConns: 1,
		StatementTimeout: 15 * time.Second, LockTimeout: 3 * time.Second, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	unguarded, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer unguarded.Close()

	const calls = 20
	q := dbsqlc.New()
	// customPlans runs StockLockRows in calls transactions and StockList
	// as calls reads, then returns how many custom plans each got on the
	// pool's connection: each is a planning at execution. (The generic plan
	// is planned once and reused; pg_prepared_statements counts its uses.)
	customPlans := func(pool *postgres.Pool) (locks, list int) {
		runner := store.NewRunner(pool, testkit.Logger(t), nil, store.RetryPolicy{},
			store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: time.Second})
		for i := range calls {
			lock := ids[3*i : 3*i+1+i%3] // one to three ids
			err := runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
				_, err := q.StockLockRows(ctx, testkit.Conn(tx), lock)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.StockList(ctx, testkit.Conn(runner.WithoutTx(nil)), dbsqlc.StockListParams{Before: ids[i], RowLimit: 20}); err != nil {
				t.Fatal(err)
			}
		}
		count := func(name string) int {
			var n int
			err := pool.QueryRow(ctx, `SELECT coalesce(sum(custom_plans), 0) FROM pg_prepared_statements
			                           WHERE statement LIKE '-- name: ' || $1::text || ' %'`, name).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		return count("StockLockRows"), count("StockList")
	}

	locks, list := customPlans(postgres.Wrap(unguarded))
	if locks < calls-1 || list < calls-1 {
		t.Fatalf("naive variant (no plan_cache_mode in the guards): StockLockRows got %d custom plans and StockList %d in %d calls each; "+
			"want one at (nearly) every call, as under plan_cache_mode = auto", locks, list, calls)
	}
	t.Logf("naive variant (auto): StockLockRows got %d custom plans, StockList %d, in %d calls each", locks, list, calls)

	locks, list = customPlans(guarded)
	if locks != 0 || list != 0 {
		t.Errorf("StockLockRows got %d custom plans and StockList %d in %d calls each, want none: the generic plan, planned once", locks, list, calls)
	}
}
