package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// StockAdjust refuses in one guarded statement to go below zero (pattern
// 2): zero rows, mapped to InsufficientStockError with the stock it found;
// nothing changes and no adjustment is recorded. A missing product is
// not_found.
func TestStockAdjustGuardedAtZero(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adj, err := domain.NewStockAdjustment(mugID, -(initialStock + 1), "breakage")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.repos.Stock().Adjust(b.ctx, staffID, adj)
	var short *domain.InsufficientStockError
	if !errors.As(err, &short) || short.Requested != initialStock+1 || short.Available != initialStock {
		t.Fatalf("adjust below zero: %v, want insufficient stock (requested %d, available %d)", err, initialStock+1, initialStock)
	}
	if got := b.queryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, mugID); got != initialStock {
		t.Errorf("stock %d after a refused adjustment", got)
	}
	if n := b.queryInt(`SELECT count(*) FROM stock_adjustments`); n != 0 {
		t.Errorf("%d adjustments recorded for a refused one", n)
	}

	adj.Delta = -initialStock
	level, err := b.repos.Stock().Adjust(b.ctx, staffID, adj)
	if err != nil || level.Stock() != 0 || level.Version() != 2 {
		t.Fatalf("adjust to zero: %v, %v", level, err)
	}
	if n := b.queryInt(`SELECT count(*) FROM stock_adjustments WHERE stock_after = 0`); n != 1 {
		t.Errorf("%d adjustments recorded, want 1", n)
	}

	adj.ProductID = uuid.New()
	if _, err := b.repos.Stock().Adjust(b.ctx, staffID, adj); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("missing product: %v, want not_found", err)
	}
}

// StockLockRows locks in product id order (the global lock order)
// whatever order it is given, leaves out unknown ids, and reads each
// product's price.
func TestStockLockRowsInProductIDOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		rows, err := repos.Stock().LockRows(ctx, []uuid.UUID{plateID, uuid.New(), mugID})
		if err != nil {
			return err
		}
		want := []domain.StockRow{{ID: mugID, Price: mugPrice, Stock: initialStock}, {ID: plateID, Price: platePrice, Stock: initialStock}}
		if len(rows) != 2 || rows[0] != want[0] || rows[1] != want[1] {
			t.Errorf("locked %+v, want %+v", rows, want)
		}
		return nil
	})
}
