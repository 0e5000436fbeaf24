package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetStock returns the stock level of one product, read without a
// transaction, from a read replica when one has applied every write
// committed before the request (Reader); any actor may read stock levels.
// Codes: not_found.
type GetStock struct{ Reader Reader }

// GetStock is the use case wired to the service's reader (Deps).
func (u UseCases) GetStock() GetStock { return GetStock{Reader: u.deps.Reader} }

// Handle runs the query; seen is the newest version the caller holds.
func (q GetStock) Handle(ctx context.Context, auth *AuthCheck, productID uuid.UUID, seen Seen) (*domain.StockLevel, error) {
	return readByID(ctx, q.Reader, auth, seen, productID, Repositories.Stock, StockRepo.Get)
}
