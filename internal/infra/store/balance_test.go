package store_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestEveryOrderWriteMovesTheBalance fails when a statement that writes
// orders is added without deciding how it moves the balance. The customer's
// maintained balance is the sum of total_cents - paid_cents over their
// placed and shipped orders, so any statement that inserts an order or
// changes its total, paid amount or status must move it in the same
// transaction. The decision is written beside the statement, in its comment
// in db/queries: a line "-- Balance: " naming the balance statement that goes
// with it, or saying why none does (TestBalanceFollowsEveryOrderChange then
// drives each path and compares the balance with the orders after every step).
func TestEveryOrderWriteMovesTheBalance(t *testing.T) {
	t.Parallel()
	writes := regexp.MustCompile(`(?is)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+orders\b`)
	notes := balanceNotes(t)
	for _, q := range generatedQueries(t) {
		if !writes.MatchString(q.sql) {
			continue
		}
		if notes[q.name] == "" {
			t.Errorf("%s writes orders but says nothing of the balance: move actors.balance_cents in the same transaction, and say which statement does (or why none) in a \"-- Balance: \" line of its comment in db/queries", q.name)
		}
		delete(notes, q.name)
	}
	for name := range notes {
		t.Errorf("%s has a \"-- Balance: \" line but writes no orders: remove the line", name)
	}
}

// balanceNotes reads the "-- Balance: " line of every query in db/queries,
// by query name.
func balanceNotes(t *testing.T) map[string]string {
	t.Helper()
	notes := map[string]string{}
	for _, q := range testkit.Queries(t) {
		if note, ok := q.Note("Balance"); ok {
			notes[q.Name] = note
		}
	}
	return notes
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
