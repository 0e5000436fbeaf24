package store_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// orderWrites names every sqlc statement that writes the orders table and
// the balance statement that goes with it in the same transaction. The
// customer's maintained balance is the sum of total_cents - paid_cents over
// their placed and shipped orders, so any statement that inserts an order or
// changes its total, paid amount or status must move it.
var orderWrites = map[string]string{
	"OrderInsert":     "ActorChargeBalance, first in placement's write batch (app.PlaceOrder, store.WritePlacement)",
	"OrderAddPayment": "ActorReleaseBalance of the amount (app.RecordPayment)",
	"OrderSetStatus":  "ActorReleaseBalance of what was still owed on cancel (app.CancelOrder); a ship keeps the order owed",
	"OrderAddRefund":  "none: only a cancelled order is refunded, and a cancelled order owes nothing (app.RecordRefund)",
}

// TestEveryOrderWriteMovesTheBalance fails when a statement that writes
// orders is added without deciding how it moves the balance: every such
// statement in the generated code must be listed in orderWrites (and
// TestBalanceFollowsEveryOrderChange drives each listed path and compares
// the balance with the orders after every step).
func TestEveryOrderWriteMovesTheBalance(t *testing.T) {
	t.Parallel()
	writes := regexp.MustCompile(`(?is)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+orders\b`)
	var found []string
	for _, q := range generatedQueries(t) {
		if writes.MatchString(q.sql) {
			found = append(found, q.name)
			if _, ok := orderWrites[q.name]; !ok {
				t.Errorf("%s writes orders but moves no balance: move actors.balance_cents in the same transaction and list it in orderWrites", q.name)
			}
		}
	}
	for name := range orderWrites {
		if !slices.Contains(found, name) {
			t.Errorf("orderWrites lists %s, which no longer writes orders", name)
		}
	}
}

// TestBalanceMigrationBackfillsFromOrders: the database is taken back to
// before the balance existed, orders of every status are written as an
// older binary would have, and migrating up sets each customer's balance to
// what their placed and shipped orders owe; api check then finds nothing.
// Down and up again gives the same result.
func TestBalanceMigrationBackfillsFromOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.DB(t)
	_, migrator := testkit.Migrator(t, url)
	const balanceVersion = 5
	if _, err := migrator.DownTo(ctx, balanceVersion-1); err != nil {
		t.Fatalf("migrate down to %d: %v", balanceVersion-1, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// a owes 1000 (placed) + 500 (shipped, 200 of 700 paid); its cancelled
	// and fully paid orders count nothing. b has only a cancelled order,
	// c no order at all, d only fully paid ones. Staff owe nothing.
	exec(`INSERT INTO actors (id, name, role, credit_limit_cents) VALUES
		('00000000-0000-7000-8000-00000000000a', 'a', 'customer', 100000),
		('00000000-0000-7000-8000-00000000000b', 'b', 'customer', 100000),
		('00000000-0000-7000-8000-00000000000c', 'c', 'customer', 100000),
		('00000000-0000-7000-8000-00000000000d', 'd', 'customer', 100000),
		('00000000-0000-7000-8000-00000000000e', 'e', 'staff', 0)`)
	exec(`INSERT INTO orders (id, customer_id, status, total_cents, paid_cents) VALUES
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000a', 'placed', 1000, 0),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000a', 'shipped', 700, 200),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000a', 'cancelled', 5000, 0),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000a', 'shipped', 300, 300),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000b', 'cancelled', 900, 0),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000d', 'placed', 400, 400),
		(gen_random_uuid(), '00000000-0000-7000-8000-00000000000d', 'shipped', 600, 600)`)
	want := map[string]int64{"a": 1500, "b": 0, "c": 0, "d": 0, "e": 0}

	for round := 0; round < 2; round++ {
		// Up to the end: the contract migration 00008 drops the index.
		if _, err := migrator.Up(ctx); err != nil {
			t.Fatalf("round %d: migrate up: %v", round, err)
		}
		rows, err := conn.Query(ctx, `SELECT name, balance_cents FROM actors`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for rows.Next() {
			var name string
			var b int64
			if err := rows.Scan(&name, &b); err != nil {
				t.Fatal(err)
			}
			got[name] = b
		}
		rows.Close()
		for name, w := range want {
			if got[name] != w {
				t.Errorf("round %d: balance of %s is %d, want %d", round, name, got[name], w)
			}
		}
		// api check reads the whole current schema: take it to the latest
		// migration first (the next round migrates down through it).
		if _, err := migrator.Up(ctx); err != nil {
			t.Fatalf("round %d: migrate up: %v", round, err)
		}
		findings, err := store.Check(ctx, conn, store.CheckOptions{})
		if err != nil {
			t.Fatalf("round %d: check after the migration: %v", round, err)
		}
		for _, f := range findings {
			if f.Kind == "balance" { // the bare orders of this test have no lines, payments or events: only the balances matter
				t.Errorf("round %d: check after the migration: %s", round, f)
			}
		}
		var idx bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass('orders_customer_outstanding_idx') IS NOT NULL`).Scan(&idx); err != nil || idx {
			t.Errorf("round %d: the index of the old sum is still there (%v)", round, err)
		}
		if _, err := conn.Exec(ctx, `UPDATE actors SET balance_cents = -1 WHERE name = 'c'`); err == nil {
			t.Errorf("round %d: a negative balance was stored", round)
		}
		if round == 0 {
			if _, err := migrator.DownTo(ctx, balanceVersion-1); err != nil {
				t.Fatalf("migrate down: %v", err)
			}
			if err := conn.QueryRow(ctx, `SELECT to_regclass('orders_customer_outstanding_idx') IS NOT NULL`).Scan(&idx); err != nil || !idx {
				t.Errorf("down did not restore the index (%v)", err)
			}
		}
	}
}
