package app

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

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
//
// Patterns and rule ids: docs/patterns.md.
type UpdateProduct struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// UpdateProduct is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) UpdateProduct() UpdateProduct {
	return UpdateProduct{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

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
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Product, error) {
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
