package load

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Data shape shared with the pgbench scripts: product n has the id
// 00000000-0000-7000-8000-<n as 12 decimal digits>; spread products are
// 1..NProducts, the hot ones HotBase+1 and HotBase+2; pgbench's customer
// for client c is PgbenchCustomerBase+c.
const (
	NProducts           = 10000
	HotBase             = 100000
	PgbenchCustomerBase = 900000
	InitialStock        = 1_000_000_000
)

// ProductID is the id of product n.
func ProductID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }

// Seed creates the benchmark's products, their initial stock, pgbench's
// customers and the helper functions the pgbench scripts call. It runs once,
// on a freshly migrated database.
func Seed(ctx context.Context, conn *pgx.Conn) error {
	steps := []struct {
		sql  string
		args []any
	}{
		{`CREATE FUNCTION bench_pid(n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE
		  AS $$ SELECT ('00000000-0000-7000-8000-' || lpad(n::text, 12, '0'))::uuid $$`, nil},
		// A time-ordered id like the service's UUIDv7 order ids, so that the
		// orders primary key grows at its right edge in both.
		{`CREATE FUNCTION bench_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE
		  AS $$ SELECT encode(overlay(uuid_send(gen_random_uuid())
		          placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
		          FROM 1 FOR 6), 'hex')::uuid $$`, nil},
		// The UUIDv7 of the transaction's start and the random number k: the
		// pipelined script's order id, the same value in every statement of
		// its transaction, since a pipeline cannot read one back (\gset).
		{`CREATE FUNCTION bench_uuidv7_at(k bigint) RETURNS uuid LANGUAGE sql STABLE
		  AS $$ SELECT (lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint), 12, '0') || '7' ||
		          substr(lpad(to_hex(k), 18, '0'), 1, 3) || '8' || substr(lpad(to_hex(k), 18, '0'), 4, 15))::uuid $$`, nil},
		{`CREATE TABLE bench_initial_stock (product_id uuid PRIMARY KEY, stock bigint NOT NULL)`, nil},
		{`INSERT INTO products (id, sku, name, price_cents)
		  SELECT bench_pid(n), 'BENCH-' || n, 'Bench product ' || n, 100 + n % 900
		  FROM generate_series(1, $1::int) n
		  UNION ALL
		  SELECT bench_pid(n), 'HOT-' || n, 'Hot product ' || n, 500
		  FROM generate_series($2::int + 1, $2::int + 2) n`, []any{NProducts, HotBase}},
		{`INSERT INTO stock_levels (product_id, stock) SELECT id, $1::bigint FROM products`, []any{InitialStock}},
		{`INSERT INTO bench_initial_stock SELECT product_id, stock FROM stock_levels`, nil},
		{`INSERT INTO actors (id, name, role, credit_limit_cents)
		  SELECT bench_pid($1::int + c), 'pgbench customer ' || c, 'customer', 100000000000
		  FROM generate_series(0, 255) c`, []any{PgbenchCustomerBase}},
		// Each pgbench client's token, for the pipelined script's token check
		// (pgbench's client_id c orders as customer PgbenchCustomerBase + c).
		{`INSERT INTO api_tokens (token_hash, actor_id)
		  SELECT sha256(('pgbench-token-' || c)::bytea), bench_pid($1::int + c)
		  FROM generate_series(0, 255) c`, []any{PgbenchCustomerBase}},
		{`VACUUM ANALYZE`, nil},
	}
	for _, st := range steps {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("%.60s: %w", st.sql, err)
		}
	}
	return nil
}

// Reset returns the database to the seeded state between runs: no orders,
// no keys, every stock level at its initial stock, every customer owing
// nothing (their maintained balance follows the truncated orders); then
// vacuums and checkpoints so that every run starts from the same physical
// state.
func Reset(ctx context.Context, conn *pgx.Conn) error {
	var outbox bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('outbox_events') IS NOT NULL`).Scan(&outbox); err != nil {
		return err
	}
	// CASCADE empties every table that references these too: order_lines,
	// payments, refunds where the schema has it, and whatever table a new
	// command adds that references an order, with no edit here.
	tables := "orders, idempotency_keys, stock_adjustments"
	if outbox {
		tables += ", outbox_events"
	}
	for _, q := range []string{
		`TRUNCATE ` + tables + ` CASCADE`,
		`UPDATE stock_levels s SET stock = b.stock, version = 1 FROM bench_initial_stock b
		 WHERE b.product_id = s.product_id AND (s.stock <> b.stock OR s.version <> 1)`,
		`UPDATE actors SET balance_cents = 0 WHERE balance_cents <> 0`,
		`VACUUM ANALYZE stock_levels`,
		`VACUUM ANALYZE products`,
		`VACUUM ANALYZE actors`,
		`CHECKPOINT`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("reset: %s: %w", q, err)
		}
	}
	return nil
}

// Invariants is the state check after a run.
type Invariants struct {
	Orders          int64 `json:"orders"`
	CompletedKeys   int64 `json:"completed_keys"`
	InProgressKeys  int64 `json:"in_progress_keys"`
	KeysNamingOrder int64 `json:"keys_naming_an_order"`
	StockMismatches int64 `json:"stock_mismatches"`
	NegativeStock   int64 `json:"negative_stock"`
	// OutboxPending and OutboxDelivered count the events left to deliver
	// and delivered when the run ended (the dispatch scenario).
	OutboxPending   int64    `json:"outbox_pending"`
	OutboxDelivered int64    `json:"outbox_delivered"`
	Violations      []string `json:"violations,omitempty"`
}

// OK says whether every invariant held.
func (v Invariants) OK() bool { return len(v.Violations) == 0 }

// Check verifies, through SQL, what must hold after any run:
//   - stock conservation: for every product, initial stock − current stock
//     = the quantities on its lines of placed or shipped orders;
//   - no negative stock;
//   - one order per key: every completed placeOrder key names a distinct
//     order, there are as many orders as such keys (unless keys were
//     disabled), and no key is left in progress;
//   - the orders table holds exactly the fresh placements the clients saw
//     (give or take the placements whose outcome a transport error hid).
func Check(ctx context.Context, conn *pgx.Conn, keys bool, freshSeen, uncertain int64) (Invariants, error) {
	var v Invariants
	err := conn.QueryRow(ctx, `
SELECT
  (SELECT count(*) FROM orders),
  (SELECT count(*) FROM idempotency_keys WHERE operation = 'placeOrder' AND state = 'completed'),
  (SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'),
  (SELECT count(DISTINCT o.id) FROM idempotency_keys k
     JOIN orders o ON o.id = (convert_from(k.response_body, 'UTF8')::jsonb ->> 'id')::uuid
    WHERE k.operation = 'placeOrder' AND k.state = 'completed'),
  (SELECT count(*) FROM stock_levels p
     JOIN bench_initial_stock b ON b.product_id = p.product_id
     LEFT JOIN (SELECT l.product_id, sum(l.quantity) AS q
                  FROM order_lines l JOIN orders o ON o.id = l.order_id
                 WHERE o.status IN ('placed', 'shipped')
                 GROUP BY l.product_id) s ON s.product_id = p.product_id
    WHERE b.stock - p.stock <> coalesce(s.q, 0)),
  (SELECT count(*) FROM stock_levels WHERE stock < 0)`).Scan(
		&v.Orders, &v.CompletedKeys, &v.InProgressKeys, &v.KeysNamingOrder, &v.StockMismatches, &v.NegativeStock)
	if err != nil {
		return v, fmt.Errorf("check invariants: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('pending', 'claimed')),
		count(*) FILTER (WHERE state = 'delivered') FROM outbox_events`).Scan(&v.OutboxPending, &v.OutboxDelivered); err != nil {
		return v, fmt.Errorf("count outbox events: %w", err)
	}
	bad := func(f string, a ...any) { v.Violations = append(v.Violations, fmt.Sprintf(f, a...)) }
	if v.StockMismatches != 0 {
		bad("stock conservation: %d products' stock does not match their order lines", v.StockMismatches)
	}
	if v.NegativeStock != 0 {
		bad("negative stock on %d products", v.NegativeStock)
	}
	if v.InProgressKeys != 0 {
		bad("%d idempotency keys left in progress", v.InProgressKeys)
	}
	if keys {
		if v.CompletedKeys != v.Orders || v.KeysNamingOrder != v.Orders {
			bad("one order per key: %d orders, %d completed keys, %d distinct orders named by keys",
				v.Orders, v.CompletedKeys, v.KeysNamingOrder)
		}
	} else if v.CompletedKeys != 0 {
		bad("keys disabled but %d completed keys stored", v.CompletedKeys)
	}
	if v.Orders < freshSeen || v.Orders > freshSeen+uncertain {
		bad("clients saw %d fresh placements (%d uncertain) but the database holds %d orders",
			freshSeen, uncertain, v.Orders)
	}
	return v, nil
}

// CheckSteady is Check for runs that do not truncate and let keys expire
// (the soak): stock conservation, no negative stock, no key left in
// progress. The per-run counts of orders and keys do not apply: the tables
// hold earlier runs' orders, and the purge removes keys during the run.
func CheckSteady(ctx context.Context, conn *pgx.Conn) (Invariants, error) {
	v, err := Check(ctx, conn, false, 0, 1<<62)
	if err != nil {
		return v, err
	}
	var kept []string
	for _, s := range v.Violations {
		if !strings.HasPrefix(s, "keys disabled") {
			kept = append(kept, s)
		}
	}
	v.Violations = kept
	return v, nil
}
