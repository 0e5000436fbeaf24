package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetStock returns the stock level of one product, read without a
// transaction; any actor may read stock levels. Codes: not_found.
type GetStock struct{ Transactor Transactor }

// Handle runs the query.
func (q GetStock) Handle(ctx context.Context, productID uuid.UUID) (*domain.StockLevel, error) {
	return q.Transactor.WithoutTx().Stock().Get(ctx, productID)
}
