package app

import (
	"context"
	"slices"

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
type CreateProduct struct{ Transactor Transactor }

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
	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Product, error) {
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

// UpdateProduct changes a product's name or price.
//
// Invariant: no accepted change is silently overwritten (lost update).
// Mechanism: optimistic concurrency (pattern 4, EXT.CONCURRENCY.VERSION.001):
// the caller's If-Match names the version it read, and the UPDATE applies only
// WHERE version = that version. An If-Match that lists several versions reads
// the current one first and guards the UPDATE with it, so a version that
// moves in between is still a conflict. The version is the catalogue's alone:
// sales, cancellations and adjustments change the stock level, never the
// product, so they never make an edit's If-Match stale
// (EXT.CONCURRENCY.ADOPT.001), and no placement holds a lock on the product
// row. Codes: forbidden, validation_failed, not_found, version_conflict.
type UpdateProduct struct{ Transactor Transactor }

// UpdateProductCommand is the input of UpdateProduct.
type UpdateProductCommand struct {
	ID uuid.UUID
	// Expected lists the versions the caller's If-Match names; the change
	// applies when the product is at any of them (RFC 9110 §13.1.1).
	Expected   []domain.Version
	Name       *string
	PriceCents *int64
}

// Handle runs the command.
func (h UpdateProduct) Handle(ctx context.Context, cmd UpdateProductCommand, call Call[*domain.Product]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	patch, err := domain.NewProductPatch(cmd.Name, cmd.PriceCents)
	if err != nil {
		return Outcome{}, err
	}
	if len(cmd.Expected) == 0 {
		return Outcome{}, domain.ErrVersionConflict
	}
	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Product, error) {
		expected := cmd.Expected[0]
		if len(cmd.Expected) > 1 {
			current, err := repos.Products().Get(ctx, cmd.ID)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(cmd.Expected, current.Version()) {
				return nil, domain.ErrVersionConflict
			}
			expected = current.Version()
		}
		return repos.Products().Update(ctx, cmd.ID, expected, patch)
	})
}

// Products answers the product queries.
type Products struct{ Transactor Transactor }

// Get returns one product; any actor may read the catalogue.
func (q Products) Get(ctx context.Context, id uuid.UUID) (*domain.Product, error) {
	return q.Transactor.WithoutTx().Products().Get(ctx, id)
}

// List returns a page of products, newest first.
func (q Products) List(ctx context.Context, page Page) ([]*domain.Product, error) {
	return q.Transactor.WithoutTx().Products().List(ctx, page)
}
