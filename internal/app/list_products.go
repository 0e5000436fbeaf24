package app

import (
	"context"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ListProducts returns a page of products, newest first, read without a
// transaction, from a read replica when one has applied every write
// committed before the request (Reader).
type ListProducts struct{ Reader Reader }

// ListProducts is the use case wired to the service's reader (Deps).
func (u UseCases) ListProducts() ListProducts { return ListProducts{Reader: u.deps.Reader} }

// Handle runs the query.
func (q ListProducts) Handle(ctx context.Context, auth *AuthCheck, page Page) ([]*domain.Product, error) {
	return readPage(ctx, q.Reader, auth, page, Repositories.Products, ProductRepo.List)
}
