package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// CreateProduct adds a product to the catalogue, with its stock level.
//
// Invariant: a SKU names one product. Mechanism: the products_sku_key unique
// constraint (pattern 1), so two concurrent creates with one SKU cannot both
// commit; the loser gets sku_taken. The product and its stock level (the
// initial stock, 0 when none is given) are inserted in one transaction, so
// neither exists without the other. Codes: forbidden, validation_failed,
// sku_taken.
//
// Patterns and rule ids: docs/patterns.md.
type CreateProduct struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// CreateProduct is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) CreateProduct() CreateProduct {
	return CreateProduct{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// CreateProductCommand is the input of CreateProduct.
type CreateProductCommand struct {
	SKU        string
	Name       string
	PriceCents int64
	Stock      int64
}

// Handle runs the command.
func (h CreateProduct) Handle(ctx context.Context, cmd CreateProductCommand, call Call[*domain.Product]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Outcome{}, err
	}
	p, level, err := domain.NewProduct(id, cmd.SKU, cmd.Name, cmd.PriceCents, cmd.Stock)
	if err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Product, error) {
		created, err := repos.Products().Insert(ctx, p)
		if err != nil {
			return nil, err
		}
		if _, err := repos.Stock().Insert(ctx, level); err != nil {
			return nil, err
		}
		return created, nil
	})
}
