package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// GetOrderBatched reads an order and its lines in one round trip (OrderGet
// and OrderLinesGet in one batch) on repos's connection: the fast path that
// orderRepo.Get had until docs/fast-path.md row 7 found no service-level
// gain, kept here so that BenchmarkOrderRead can measure it again.
func GetOrderBatched(ctx context.Context, repos app.Repositories, id uuid.UUID) (*domain.Order, error) {
	r := repos.(*repositories)
	var o dbsqlc.Order
	var lines []dbsqlc.OrderLine
	var b postgres.Batch
	b.Add(func(db dbsqlc.DBTX) (err error) {
		o, err = r.q.OrderGet(ctx, db, id)
		return err
	})
	b.Add(func(db dbsqlc.DBTX) (err error) {
		lines, err = r.q.OrderLinesGet(ctx, db, []uuid.UUID{id})
		return err
	})
	if err := b.Send(ctx, r.db); err != nil {
		return nil, postgres.Translate(err)
	}
	return toOrder(o, toOrderLines(lines))
}
