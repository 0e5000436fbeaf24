package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// FAST PATH (docs/fast-path.md #4): the placement in two batches.
//
// placementRepo is the repositories' placement store (app.PlacementStore),
// pipelined: the statements of ActorRepo.LockForOrder and StockRepo.LockRows
// go out as one batch, those of ActorRepo.ChargeBalance, StockRepo.AddStock
// and OrderRepo.Insert as another. The server executes a batch's statements
// one after the other in the order queued and stops at the first error, so
// the locks are taken in the same global order (customer, then stock rows by
// product id) and every error is the one the stepwise calls
// (StepwisePlacement) would have returned. It is an optimisation of the
// stepwise path (docs/fast-path.md, row 4): to remove it, delete this file
// and return StepwisePlacement(s) from repositories.Placement.
type placementRepo struct{ *repositories }

var _ app.PlacementStore = placementRepo{}

func (s placementRepo) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	var out app.PlacementLocks
	var b postgres.Batch
	b.Add(func(db dbsqlc.DBTX) error {
		row, err := s.q.ActorLockForOrder(ctx, db, customer)
		if err != nil {
			return err
		}
		out.Credit = toCreditState(row)
		return nil
	})
	b.Add(func(db dbsqlc.DBTX) error {
		rows, err := s.q.StockLockRows(ctx, db, ids)
		if err != nil {
			return err
		}
		out.Rows = toStockRows(rows)
		return nil
	})
	if err := b.Send(ctx, s.db); err != nil {
		return app.PlacementLocks{}, wrap("placement.lock_for_placement", err)
	}
	return out, nil
}

func (s placementRepo) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	var row dbsqlc.Order
	// The arguments are built once, outside the calls: each call runs twice
	// (postgres.Batch), and a map walked inside it would differ between runs.
	charge := dbsqlc.ActorChargeBalanceParams{ID: o.CustomerID(), AmountCents: int64(o.Total())}
	deltas, order, lines := addStockParams(take), orderInsertParams(o), orderLinesParams(o)
	var b postgres.Batch
	b.Add(func(db dbsqlc.DBTX) error {
		n, err := s.q.ActorChargeBalance(ctx, db, charge)
		if err != nil {
			return err
		}
		if n != 1 {
			return domain.ErrCreditRefused
		}
		return nil
	})
	b.Add(func(db dbsqlc.DBTX) error { return s.q.StockAddDeltas(ctx, db, deltas) })
	b.Add(func(db dbsqlc.DBTX) (err error) {
		row, err = s.q.OrderInsert(ctx, db, order)
		return err
	})
	b.Add(func(db dbsqlc.DBTX) error { return s.q.OrderLinesInsert(ctx, db, lines) })
	if err := b.Send(ctx, s.db); err != nil {
		return nil, wrap("placement.write_placement", err)
	}
	return toOrder(row, o.Lines())
}
