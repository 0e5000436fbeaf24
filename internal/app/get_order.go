package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetOrder returns one order, read without a transaction. Another
// customer's order is reported as not found, so that its existence is not
// revealed. Codes: not_found.
type GetOrder struct{ Transactor Transactor }

// Handle runs the query.
func (q GetOrder) Handle(ctx context.Context, p Principal, id uuid.UUID) (*domain.Order, error) {
	return visibleOrder(ctx, q.Transactor.WithoutTx(), p, id)
}
