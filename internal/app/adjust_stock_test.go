package app_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// raceWithdrawals sends 30 concurrent adjustments of -1, each with its own
// key, against a stock of 10, and returns the broken invariants: stock is
// never negative and no unit is sold twice (EXT.CONCURRENCY.ADOPT.001), so
// exactly 10 succeed, 20 get insufficient_stock, the stock ends at 0 and
// the stock_adjustments rows account for every unit. Both runs meet before
// the stock_adjustments row.
//
// Patterns and rule ids: docs/patterns.md.
func raceWithdrawals(t *testing.T, e *testkit.Env) []string {
	const stock, n = 10, 30
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: stock})
	codes := make([]domain.Code, n)
	done := testkit.Meet{Where: testkit.Before, Statement: "StockAdjustmentInsert", N: 8}.Arm(t, e)
	defer done()
	testkit.Race(n, func(i int) {
		err := as(e, e.Staff).adjust(id, "sale-"+strconv.Itoa(i), -1, "sold at the counter")
		codes[i] = code(err)
		if err != nil && codes[i] != domain.CodeInsufficientStock {
			t.Errorf("withdrawal %d: %v", i, err)
		}
	})
	var broken []string
	ok, refused := countCode(codes, ""), countCode(codes, domain.CodeInsufficientStock)
	if ok != stock || refused != n-stock {
		broken = append(broken, fmt.Sprintf("%d withdrawals of 1 succeeded and %d were refused from a stock of %d, want %d and %d", ok, refused, stock, stock, n-stock))
	}
	final := stockOf(e, id)
	if final != 0 {
		broken = append(broken, fmt.Sprintf("stock ended at %d, want 0", final))
	}
	rows := e.QueryInt(`SELECT count(*) FROM stock_adjustments WHERE product_id = $1`, id)
	sum := e.QueryInt(`SELECT COALESCE(sum(delta), 0) FROM stock_adjustments WHERE product_id = $1`, id)
	if rows != int64(ok) || stock+sum != final {
		broken = append(broken, fmt.Sprintf("stock_adjustments hold %d rows summing to %d for %d accepted withdrawals, but stock went from %d to %d", rows, sum, ok, stock, final))
	}
	if low := e.QueryInt(`SELECT COALESCE(min(stock_after), 0) FROM stock_adjustments WHERE product_id = $1`, id); low < 0 {
		broken = append(broken, fmt.Sprintf("stock went down to %d", low))
	}
	return broken
}

// TestRaceWithdrawalsNeverOversell: concurrent withdrawals never take more
// units than there are, and every accepted one is counted
// (EXT.CONCURRENCY.ADOPT.001: the invariant "stock is never negative", kept
// by one guarded UPDATE … WHERE stock + delta >= 0 and backed by the
// stock_levels_stock_nonnegative CHECK). The naive variant reads the stock,
// checks it in Go and writes the value it computed, on a database whose CHECK
// was dropped, and is shown to oversell and lose updates. Guarded, the first
// withdrawal is held before its stock_adjustments row with the row lock of
// its guarded UPDATE until 7 others wait on it; naive, 8 withdrawals have
// read the stock and none has written.
//
// Patterns and rule ids: docs/patterns.md.
func TestRaceWithdrawalsNeverOversell(t *testing.T) {
	t.Parallel()
	testkit.InvariantTest(t, raceWithdrawals, func(t *testing.T) *testkit.Env {
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Stock: func(repos app.Repositories) app.StockRepo {
				return naiveAdjust{StockRepo: repos.Stock(), db: testkit.Conn(repos)}
			}}
		}})
		// The constraint is the last line of defence; without it the naive
		// run shows what the guard alone has to prevent.
		e.Exec(`ALTER TABLE stock_levels DROP CONSTRAINT stock_levels_stock_nonnegative`)
		return e
	})
}

// naiveAdjust checks the stock in the application and then writes the value
// it computed: every writer that read the same stock overwrites the others.
type naiveAdjust struct {
	app.StockRepo
	db dbsqlc.DBTX
}

func (n naiveAdjust) Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error) {
	var stock int64
	err := n.db.QueryRow(ctx, `SELECT stock FROM stock_levels WHERE product_id = $1`, adj.ProductID).Scan(&stock)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if stock+adj.Delta < 0 {
		return nil, &domain.InsufficientStockError{ProductID: adj.ProductID, Requested: -adj.Delta, Available: stock}
	}
	after := stock + adj.Delta
	err = dbsqlc.New().StockAdjustmentInsert(ctx, n.db, dbsqlc.StockAdjustmentInsertParams{
		ID: uuid.New(), ProductID: adj.ProductID, ActorID: actorID, Delta: adj.Delta, Reason: adj.Reason, StockAfter: after,
	})
	if err != nil {
		return nil, err
	}
	if _, err := n.db.Exec(ctx, `UPDATE stock_levels SET stock = $2, version = version + 1, updated_at = now() WHERE product_id = $1`, adj.ProductID, after); err != nil {
		return nil, err
	}
	return n.Get(ctx, adj.ProductID)
}
