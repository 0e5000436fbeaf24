package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestStockLevelMigrationKeepsEveryVersionAndUnit migrates a database back
// to the schema before stock levels (00003), fills it as the previous
// release would have (products whose single version counted sales), migrates
// up and checks that every unit of stock moved to stock_levels, that every
// product kept its version (an ETag a client holds stays valid for an edit),
// and that each stock level starts at that version. Then down again: the
// single version exceeds every version either aggregate issued.
func TestStockLevelMigrationKeepsEveryVersionAndUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.DB(t)
	sqlDB, migrator := testkit.Migrator(t, url)
	if _, err := migrator.DownTo(ctx, 3); err != nil {
		t.Fatalf("down to 00003: %v", err)
	}

	type before struct {
		stock, version int64
		updatedAt      time.Time
	}
	want := map[uuid.UUID]before{}
	for i := range 50 {
		id := uuid.Must(uuid.NewV7())
		b := before{stock: int64(i * 37 % 11), version: int64(1 + i*13%29), updatedAt: time.Date(2026, 1, 1+i%28, 12, 0, 0, 0, time.UTC)}
		if i == 0 {
			b.stock = 1_000_000_000
		}
		want[id] = b
		mustExec(t, sqlDB, `INSERT INTO products (id, sku, name, price_cents, stock, version, updated_at)
			VALUES ($1, $2, 'Product', 100, $3, $4, $5)`, id, fmt.Sprintf("MIG-%d", i), b.stock, b.version, b.updatedAt)
	}

	if _, err := migrator.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	var hasStock bool
	if err := sqlDB.QueryRow(`SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'products' AND column_name = 'stock')`).Scan(&hasStock); err != nil {
		t.Fatal(err)
	}
	if hasStock {
		t.Error("products still has a stock column: two sources of truth")
	}
	rows, err := sqlDB.Query(`SELECT p.id, p.version, s.stock, s.version, s.updated_at FROM products p JOIN stock_levels s ON s.product_id = p.id`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var units, wantUnits int64
	for _, b := range want {
		wantUnits += b.stock
	}
	for rows.Next() {
		var id uuid.UUID
		var pv, stock, sv int64
		var updated time.Time
		if err := rows.Scan(&id, &pv, &stock, &sv, &updated); err != nil {
			t.Fatal(err)
		}
		seen++
		units += stock
		b := want[id]
		if pv != b.version || stock != b.stock || sv != b.version || !updated.Equal(b.updatedAt) {
			t.Errorf("product %s: version %d, stock %d, stock version %d, updated %s; before: version %d, stock %d, updated %s",
				id, pv, stock, sv, updated, b.version, b.stock, b.updatedAt)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if seen != len(want) || units != wantUnits {
		t.Errorf("%d stock levels holding %d units, want %d holding %d", seen, units, len(want), wantUnits)
	}

	// A sale after the migration moves the stock level's version only.
	var some uuid.UUID
	for id := range want {
		some = id
		break
	}
	mustExec(t, sqlDB, `UPDATE stock_levels SET stock = stock + 1, version = version + 1 WHERE product_id = $1`, some)

	if _, err := migrator.DownTo(ctx, 3); err != nil {
		t.Fatalf("down to 00003 again: %v", err)
	}
	for id, b := range want {
		var stock, version int64
		if err := sqlDB.QueryRow(`SELECT stock, version FROM products WHERE id = $1`, id).Scan(&stock, &version); err != nil {
			t.Fatal(err)
		}
		wantStock, stockVersion := b.stock, b.version
		if id == some {
			wantStock, stockVersion = wantStock+1, stockVersion+1
		}
		if stock != wantStock || version <= b.version || version <= stockVersion {
			t.Errorf("after down, product %s: stock %d version %d; want stock %d and a version above %d and %d", id, stock, version, wantStock, b.version, stockVersion)
		}
	}
	if _, err := migrator.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// previousOrderStatements are the order statements of the binary before
// migration 00007, as its generated code sent them: explicit column lists,
// no refunded_cents.
var previousOrderStatements = map[string]string{
	"insert": `INSERT INTO orders (id, customer_id, status, total_cents) VALUES ($1, $2, 'placed', $3)
		RETURNING id, customer_id, status, total_cents, paid_cents, version, created_at, updated_at`,
	"get": `SELECT id, customer_id, status, total_cents, paid_cents, version, created_at, updated_at FROM orders WHERE id = $1`,
	"list": `SELECT id, customer_id, status, total_cents, paid_cents, version, created_at, updated_at FROM orders
		WHERE id < $1 ORDER BY id DESC LIMIT $2`,
	"pay": `UPDATE orders SET paid_cents = paid_cents + $1, version = version + 1, updated_at = now()
		WHERE id = $2 AND status <> 'cancelled' AND paid_cents + $1 <= total_cents
		RETURNING id, customer_id, status, total_cents, paid_cents, version, created_at, updated_at`,
	"setStatus": `UPDATE orders SET status = $1, version = version + 1, updated_at = now()
		WHERE id = $2 AND version = $3
		RETURNING id, customer_id, status, total_cents, paid_cents, version, created_at, updated_at`,
}

// TestRefundsMigrationKeepsThePreviousBinaryWorking: migration 00007 runs
// while the previous binary serves. That binary's order statements are
// prepared on a connection before the migration (as its pool's statement
// cache holds them) and sent again on it afterwards: they keep their result
// shape and work (place, read, list, pay, ship, cancel), and the rows it
// writes get refunded_cents 0. While a transaction holds a lock on orders,
// the migration gives up after its lock_timeout instead of queueing every
// request behind it, leaves nothing applied, and runs once the lock is gone.
// api check then finds nothing.
func TestRefundsMigrationKeepsThePreviousBinaryWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.DB(t)
	sqlDB, migrator := testkit.Migrator(t, url)
	if _, err := migrator.DownTo(ctx, 6); err != nil {
		t.Fatalf("down to 00006: %v", err)
	}
	old, err := pgx.Connect(ctx, url) // statements prepared and cached, pgx's default
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	customer := uuid.Must(uuid.NewV7())
	mustExec(t, sqlDB, `INSERT INTO actors (id, name, role, credit_limit_cents, balance_cents) VALUES ($1, 'c', 'customer', 100000, 0)`, customer)

	// serve runs the previous binary's order statements once: two orders,
	// one paid in part and shipped, one cancelled unpaid.
	serve := func(phase string) {
		t.Helper()
		row := func(name string, args ...any) (id uuid.UUID, version int64) {
			t.Helper()
			var cust uuid.UUID
			var status string
			var total, paid int64
			var created, updated time.Time
			err := old.QueryRow(ctx, previousOrderStatements[name], args...).Scan(&id, &cust, &status, &total, &paid, &version, &created, &updated)
			if err != nil {
				t.Fatalf("%s: the previous binary's %s: %v", phase, name, err)
			}
			return id, version
		}
		a, _ := row("insert", uuid.Must(uuid.NewV7()), customer, 1000)
		b, _ := row("insert", uuid.Must(uuid.NewV7()), customer, 500)
		row("get", a)
		_, v := row("pay", int64(300), a)
		row("setStatus", "shipped", a, v)
		row("setStatus", "cancelled", b, int64(1))
		rows, err := old.Query(ctx, previousOrderStatements["list"], uuid.Max, int32(10))
		if err == nil {
			for rows.Next() {
				var vals [8]any
				ptrs := make([]any, len(vals))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				err = rows.Scan(ptrs...)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if err != nil {
			t.Fatalf("%s: the previous binary's list: %v", phase, err)
		}
		// The balance as that binary moves it: +1000 +500, -300, -500.
		mustExec(t, sqlDB, `UPDATE actors SET balance_cents = balance_cents + 700 WHERE id = $1`, customer)
	}
	serve("before the migration")

	// A transaction that holds orders: the migration waits lock_timeout, fails whole.
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM orders`); err != nil {
		t.Fatal(err)
	}
	blocked, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = migrator.UpTo(blocked, 7)
	cancel()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("migration 00007 while a transaction held orders: %v; want it to give up on its lock_timeout (55P03)", err)
	}
	t.Logf("blocked migration gave up: %v", err)
	var applied bool
	if err := old.QueryRow(ctx, `SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'refunded_cents')`).Scan(&applied); err != nil || applied {
		t.Fatalf("the failed migration left refunded_cents behind (%v)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.UpTo(ctx, 7); err != nil {
		t.Fatalf("up to 00007: %v", err)
	}

	serve("after the migration")
	var refunded, orders int64
	if err := old.QueryRow(ctx, `SELECT sum(refunded_cents), count(*) FROM orders`).Scan(&refunded, &orders); err != nil || refunded != 0 || orders != 4 {
		t.Errorf("after the migration: %d orders, refunded %d (%v); want 4 orders, 0 refunded", orders, refunded, err)
	}
	if _, err := migrator.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	findings, err := store.Check(ctx, old, store.CheckOptions{})
	if err != nil {
		t.Fatalf("api check after the previous binary wrote on the new schema: %v", err)
	}
	for _, f := range findings {
		switch f.Kind {
		case "balance", "refund_beyond_paid", "refund_sum": // the orders' statements' own; the bare rows of this test have no lines, payments or events
			t.Errorf("api check after the previous binary wrote on the new schema: %s", f)
		}
	}
}
