package app

import (
	"context"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListStock returns a page of stock levels, newest product first, read
// without a transaction.
type ListStock struct{ Transactor Transactor }

// Handle runs the query.
func (q ListStock) Handle(ctx context.Context, page Page) ([]*domain.StockLevel, error) {
	return q.Transactor.WithoutTx().Stock().List(ctx, page)
}
