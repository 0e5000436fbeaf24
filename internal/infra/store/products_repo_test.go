package store_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ProductUpdate is guarded by the version: a stale version updates no row,
// and the repository tells the stale version (409) from a missing product
// (404) (EXT.CONCURRENCY.ADOPT.001).
// Patterns and rule ids: docs/patterns.md.
func TestProductUpdateGuardedByVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	name := "Big mug"
	patch := domain.ProductPatch{Name: &name}

	updated, err := b.repos.Products().Update(b.ctx, mugID, 1, patch)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Version() != 2 || updated.Name() != name {
		t.Fatalf("updated to version %d, name %q", updated.Version(), updated.Name())
	}

	other := "Small mug"
	_, err = b.repos.Products().Update(b.ctx, mugID, 1, domain.ProductPatch{Name: &other})
	if !errors.Is(err, domain.ErrVersionConflict) {
		t.Fatalf("stale version: %v, want version_conflict", err)
	}
	if got, _ := b.repos.Products().Get(b.ctx, mugID); got.Name() != name || got.Version() != 2 {
		t.Errorf("after a refused update: %q version %d", got.Name(), got.Version())
	}

	_, err = b.repos.Products().Update(b.ctx, uuid.New(), 1, patch)
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("missing product: %v, want not_found", err)
	}
}

// The unique SKU is the constraint's to keep (pattern 1); its violation is
// sku_taken, not a 500.
// Patterns and rule ids: docs/patterns.md.
func TestProductInsertTakenSKU(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, _, err := domain.NewProduct(uuid.New(), "MUG", "Another mug", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.repos.Products().Insert(b.ctx, p)
	if domain.ErrorCode(err) != domain.CodeSKUTaken {
		t.Fatalf("insert of a taken sku: %v, want sku_taken", err)
	}
}
