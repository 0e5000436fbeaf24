package app

import (
	"context"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListProducts returns a page of products, newest first, read without a
// transaction.
type ListProducts struct{ Transactor Transactor }

// Handle runs the query.
func (q ListProducts) Handle(ctx context.Context, page Page) ([]*domain.Product, error) {
	return q.Transactor.WithoutTx().Products().List(ctx, page)
}
