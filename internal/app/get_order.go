package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetOrder returns one order, read without a transaction, from a read
// replica when one has applied every write committed before the request
// (Reader). Another customer's order is reported as not found, so that its
// existence is not revealed. Codes: not_found.
type GetOrder struct{ Reader Reader }

// GetOrder is the use case wired to the service's reader (Deps).
func (u UseCases) GetOrder() GetOrder { return GetOrder{Reader: u.deps.Reader} }

// Handle runs the query; seen is the newest version the caller holds.
func (q GetOrder) Handle(ctx context.Context, auth *AuthCheck, p Principal, id uuid.UUID, seen Seen) (*domain.Order, error) {
	return readOne(ctx, q.Reader, auth, seen, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		return visibleOrder(ctx, repos, p, id)
	})
}
