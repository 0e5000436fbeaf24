package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// GetProduct returns one product, read without a transaction, from a read
// replica when one has applied every write committed before the request
// (Reader); any actor may read the catalogue. Codes: not_found.
type GetProduct struct{ Reader Reader }

// GetProduct is the use case wired to the service's reader (Deps).
func (u UseCases) GetProduct() GetProduct { return GetProduct{Reader: u.deps.Reader} }

// Handle runs the query; seen is the newest version the caller holds.
func (q GetProduct) Handle(ctx context.Context, auth *AuthCheck, id uuid.UUID, seen Seen) (*domain.Product, error) {
	return readByID(ctx, q.Reader, auth, seen, id, Repositories.Products, ProductRepo.Get)
}
