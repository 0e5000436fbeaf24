package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListOrders returns a page of the caller's orders (staff: every order),
// newest first, read without a transaction.
type ListOrders struct{ Transactor Transactor }

// Handle runs the query.
func (q ListOrders) Handle(ctx context.Context, p Principal, page Page) ([]*domain.Order, error) {
	customer := p.ID
	if p.IsStaff() {
		customer = uuid.Nil
	}
	return q.Transactor.WithoutTx().Orders().List(ctx, customer, page)
}
