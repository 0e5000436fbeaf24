package app

import (
	"context"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListStock returns a page of stock levels, newest product first, read
// without a transaction, from a read replica when one has applied every
// write committed before the request (Reader).
type ListStock struct{ Reader Reader }

// ListStock is the use case wired to the service's reader (Deps).
func (u UseCases) ListStock() ListStock { return ListStock{Reader: u.deps.Reader} }

// Handle runs the query.
func (q ListStock) Handle(ctx context.Context, auth *AuthCheck, page Page) ([]*domain.StockLevel, error) {
	return readPage(ctx, q.Reader, auth, page, Repositories.Stock, StockRepo.List)
}
