package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

type stockRepo struct{ *repositories }

// stockConstraint says what a broken constraint of stock_levels means
// (outcomeOfConstraint): the CHECK behind the guarded decrement (StockAdjust)
// and the placement's decrements of rows it locked and read.
func stockConstraint(e *pgconn.PgError) *domain.Error {
	if e.ConstraintName == "stock_levels_stock_nonnegative" {
		return domain.Errorf(domain.CodeInsufficientStock, "not enough stock")
	}
	return nil
}

func toStockLevel(r dbsqlc.StockLevel) *domain.StockLevel {
	return domain.RehydrateStockLevel(r.ProductID, r.Stock, domain.Version(r.Version), r.UpdatedAt)
}

func (r stockRepo) Insert(ctx context.Context, s *domain.StockLevel) (*domain.StockLevel, error) {
	row, err := r.q.StockInsert(ctx, r.db, dbsqlc.StockInsertParams{ProductID: s.ProductID(), Stock: s.Stock()})
	if err != nil {
		return nil, wrap("stock.insert", err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) Get(ctx context.Context, productID uuid.UUID) (*domain.StockLevel, error) {
	row, err := r.q.StockGet(ctx, r.db, productID)
	if err != nil {
		return nil, wrap("stock.get", err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) List(ctx context.Context, p app.Page) ([]*domain.StockLevel, error) {
	rows, err := r.q.StockList(ctx, r.db, dbsqlc.StockListParams{Before: before(p), RowLimit: int32(p.Limit)})
	if err != nil {
		return nil, wrap("stock.list", err)
	}
	out := make([]*domain.StockLevel, len(rows))
	for i, row := range rows {
		out[i] = toStockLevel(row)
	}
	return out, nil
}

func (r stockRepo) Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error) {
	row, err := r.q.StockAdjust(ctx, r.db, dbsqlc.StockAdjustParams{ProductID: adj.ProductID, Delta: adj.Delta})
	if err != nil {
		err = wrap("stock.adjust", err)
		if !errors.Is(err, domain.ErrNotFound) {
			return nil, err
		}
		// The guard refused: tell a missing product from a short stock.
		s, err := r.Get(ctx, adj.ProductID)
		if err != nil {
			return nil, err
		}
		return nil, &domain.InsufficientStockError{ProductID: s.ProductID(), Requested: -adj.Delta, Available: s.Stock()}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	err = r.q.StockAdjustmentInsert(ctx, r.db, dbsqlc.StockAdjustmentInsertParams{
		ID: id, ProductID: adj.ProductID, ActorID: actorID, Delta: adj.Delta, Reason: adj.Reason, StockAfter: row.Stock,
	})
	if err != nil {
		return nil, wrap("stock.adjust", err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) LockRows(ctx context.Context, ids []uuid.UUID) ([]domain.StockRow, error) {
	rows, err := r.q.StockLockRows(ctx, r.db, ids)
	if err != nil {
		return nil, wrap("stock.lock_rows", err)
	}
	return toStockRows(rows), nil
}

func toStockRows(rows []dbsqlc.StockLockRowsRow) []domain.StockRow {
	out := make([]domain.StockRow, len(rows))
	for i, row := range rows {
		out[i] = domain.StockRow{ID: row.ProductID, Price: domain.Cents(row.PriceCents), Stock: row.Stock}
	}
	return out
}

func (r stockRepo) AddStock(ctx context.Context, deltas map[uuid.UUID]int64) error {
	return wrap("stock.add_stock", r.q.StockAddDeltas(ctx, r.db, addStockParams(deltas)))
}

func addStockParams(deltas map[uuid.UUID]int64) dbsqlc.StockAddDeltasParams {
	ids := make([]uuid.UUID, 0, len(deltas))
	ds := make([]int64, 0, len(deltas))
	for id, d := range deltas {
		ids = append(ids, id)
		ds = append(ds, d)
	}
	return dbsqlc.StockAddDeltasParams{Ids: ids, Deltas: ds}
}
