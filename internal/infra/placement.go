package infra

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

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
	var b batch
	b.add(func(db dbsqlc.DBTX) error {
		row, err := s.q.ActorLockForOrder(ctx, db, customer)
		if err != nil {
			return err
		}
		out.Credit = toCreditState(row)
		return nil
	})
	b.add(func(db dbsqlc.DBTX) error {
		rows, err := s.q.StockLockRows(ctx, db, ids)
		if err != nil {
			return err
		}
		out.Rows = toStockRows(rows)
		return nil
	})
	if err := b.send(ctx, s.db); err != nil {
		return app.PlacementLocks{}, translate(err)
	}
	return out, nil
}

func (s placementRepo) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	var row dbsqlc.Order
	var b batch
	b.add(func(db dbsqlc.DBTX) error {
		n, err := s.q.ActorChargeBalance(ctx, db, dbsqlc.ActorChargeBalanceParams{ID: o.CustomerID(), AmountCents: int64(o.Total())})
		if err != nil {
			return err
		}
		if n != 1 {
			return domain.ErrCreditRefused
		}
		return nil
	})
	b.add(func(db dbsqlc.DBTX) error { return s.q.StockAddDeltas(ctx, db, addStockParams(take)) })
	b.add(func(db dbsqlc.DBTX) (err error) {
		row, err = s.q.OrderInsert(ctx, db, orderInsertParams(o))
		return err
	})
	b.add(func(db dbsqlc.DBTX) error { return s.q.OrderLinesInsert(ctx, db, orderLinesParams(o)) })
	if err := b.send(ctx, s.db); err != nil {
		return nil, translate(err)
	}
	return toOrder(row, o.Lines())
}
