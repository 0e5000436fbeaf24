package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListOrders returns a page of the caller's orders (staff: every order),
// newest first, read without a transaction, from a read replica when one
// has applied every write committed before the request (Reader).
type ListOrders struct{ Reader Reader }

// ListOrders is the use case wired to the service's reader (Deps).
func (u UseCases) ListOrders() ListOrders { return ListOrders{Reader: u.deps.Reader} }

// Handle runs the query.
func (q ListOrders) Handle(ctx context.Context, auth *AuthCheck, p Principal, page Page) ([]*domain.Order, error) {
	customer := p.ID
	if p.IsStaff() {
		customer = uuid.Nil
	}
	return readList(ctx, q.Reader, auth, func(ctx context.Context, repos Repositories) ([]*domain.Order, error) {
		return repos.Orders().List(ctx, customer, page)
	})
}
