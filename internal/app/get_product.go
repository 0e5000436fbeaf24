package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetProduct returns one product, read without a transaction; any actor may
// read the catalogue. Codes: not_found.
type GetProduct struct{ Transactor Transactor }

// Handle runs the query.
func (q GetProduct) Handle(ctx context.Context, id uuid.UUID) (*domain.Product, error) {
	return q.Transactor.WithoutTx().Products().Get(ctx, id)
}
