package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestStockLevelMigrationKeepsEveryVersionAndUnit is a data migration's
// own test: TestEveryMigrationKeepsThePreviousBinarysStatementsWorking
// proves for every online migration that the previous binary's statements
// keep working, but not that rows moved from one table to another arrive
// whole. A migration that moves data needs a test like this one.
//
// It migrates a database back to the schema before stock levels (00003),
// fills it as the previous release would have (products whose single
// version counted sales), migrates up and checks that every unit of stock
// moved to stock_levels, that every product kept its version (an ETag a
// client holds stays valid for an edit), and that each stock level starts
// at that version. Then down again: the single version exceeds every
// version either aggregate issued.
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
