package infra

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// The store pipelines order placement (app.PlacementStore): the statements
// of ActorRepo.LockForOrder and StockRepo.LockRows go out as one
// batch, those of ActorRepo.ChargeBalance, StockRepo.AddStock and
// OrderRepo.Insert as another. The server executes a batch's statements
// one after the other in the order queued and stops at the first error, so
// the locks are taken in the same global order (customer, then stock rows by
// product id) and every error is the one the stepwise calls would have
// returned.
var _ app.PlacementStore = (*store)(nil)

func (s *store) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	b := &pgx.Batch{}
	b.Queue(dbsqlc.ActorLockForOrderSQL, customer)
	b.Queue(dbsqlc.StockLockForUpdateSQL, ids)
	br := s.db.SendBatch(ctx, b)
	out, err := readPlacementLocks(br)
	if err = firstErr(err, br.Close()); err != nil {
		return app.PlacementLocks{}, translate(err)
	}
	return out, nil
}

func readPlacementLocks(br pgx.BatchResults) (app.PlacementLocks, error) {
	var out app.PlacementLocks
	var credit dbsqlc.ActorLockForOrderRow
	if err := br.QueryRow().Scan(&credit.CreditLimitCents, &credit.BalanceCents, &credit.Active); err != nil {
		return out, err
	}
	out.Credit = toCreditState(credit)
	rows, err := br.Query()
	if err != nil {
		return out, err
	}
	for rows.Next() {
		var r dbsqlc.StockLockForUpdateRow
		if err := rows.Scan(&r.ProductID, &r.PriceCents, &r.Stock); err != nil {
			rows.Close()
			return out, err
		}
		out.Rows = append(out.Rows, app.StockRow{ID: r.ProductID, Price: domain.Cents(r.PriceCents), Stock: r.Stock})
	}
	rows.Close()
	return out, rows.Err()
}

func (s *store) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	stock := addStockParams(take)
	lines := orderLinesParams(o)
	b := &pgx.Batch{}
	b.Queue(dbsqlc.ActorChargeBalanceSQL, int64(o.Total()), o.CustomerID())
	b.Queue(dbsqlc.StockAddDeltasSQL, stock.Ids, stock.Deltas)
	b.Queue(dbsqlc.OrderInsertSQL, o.ID(), o.CustomerID(), int64(o.Total()))
	b.Queue(dbsqlc.OrderLinesInsertSQL, lines.OrderID, lines.LineNos, lines.ProductIds, lines.Quantities, lines.UnitPrices)
	br := s.db.SendBatch(ctx, b)
	row, err := readPlacementWrite(br)
	if err = firstErr(err, br.Close()); err != nil {
		return nil, translate(err)
	}
	return toOrder(row, o.Lines())
}

func readPlacementWrite(br pgx.BatchResults) (dbsqlc.Order, error) {
	var row dbsqlc.Order
	charged, err := br.Exec()
	if err != nil {
		return row, err
	}
	if charged.RowsAffected() != 1 {
		return row, app.ErrCreditRefused
	}
	if _, err := br.Exec(); err != nil {
		return row, err
	}
	err = br.QueryRow().Scan(&row.ID, &row.CustomerID, &row.Status, &row.TotalCents, &row.PaidCents,
		&row.Version, &row.CreatedAt, &row.UpdatedAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return row, errors.New("order insert returned no row")
		}
		return row, err
	}
	_, err = br.Exec()
	return row, err
}
