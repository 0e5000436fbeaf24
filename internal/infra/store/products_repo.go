package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

type productRepo struct{ *repositories }

// productConstraint says what a broken constraint of products means
// (outcomeOfConstraint): the unique SKU is a normal outcome, a creation
// with a SKU another product has, two creations racing for one included,
// and no check comes before it (pattern 1; patterns and rule ids:
// docs/patterns.md).
func productConstraint(e *pgconn.PgError) *domain.Error {
	if e.ConstraintName == "products_sku_key" {
		return domain.Errorf(domain.CodeSKUTaken, "a product with this sku already exists")
	}
	return nil
}

func toProduct(r dbsqlc.Product) *domain.Product {
	return domain.RehydrateProduct(r.ID, domain.SKU(r.Sku), r.Name, domain.Cents(r.PriceCents),
		domain.Version(r.Version), r.CreatedAt, r.UpdatedAt)
}

func (r productRepo) Insert(ctx context.Context, p *domain.Product) (*domain.Product, error) {
	row, err := r.q.ProductInsert(ctx, r.db, dbsqlc.ProductInsertParams{
		ID: p.ID(), Sku: string(p.SKU()), Name: p.Name(), PriceCents: int64(p.Price()),
	})
	if err != nil {
		return nil, wrap("products.insert", err)
	}
	return toProduct(row), nil
}

func (r productRepo) Get(ctx context.Context, id uuid.UUID) (*domain.Product, error) {
	row, err := r.q.ProductGet(ctx, r.db, id)
	if err != nil {
		return nil, wrap("products.get", err)
	}
	return toProduct(row), nil
}

func (r productRepo) List(ctx context.Context, p app.Page) ([]*domain.Product, error) {
	rows, err := r.q.ProductList(ctx, r.db, dbsqlc.ProductListParams{Before: before(p), RowLimit: int32(p.Limit)})
	if err != nil {
		return nil, wrap("products.list", err)
	}
	out := make([]*domain.Product, len(rows))
	for i, row := range rows {
		out[i] = toProduct(row)
	}
	return out, nil
}

func (r productRepo) Update(ctx context.Context, id uuid.UUID, expected domain.Version, patch domain.ProductPatch) (*domain.Product, error) {
	params := dbsqlc.ProductUpdateParams{ID: id, Version: int64(expected)}
	if patch.Name != nil {
		params.Name = pgtype.Text{String: *patch.Name, Valid: true}
	}
	if patch.Price != nil {
		params.PriceCents = pgtype.Int8{Int64: int64(*patch.Price), Valid: true}
	}
	row, err := r.q.ProductUpdate(ctx, r.db, params)
	if err == nil {
		return toProduct(row), nil
	}
	err = wrap("products.update", err)
	if !errors.Is(err, domain.ErrNotFound) {
		return nil, err
	}
	// The guard refused: tell a missing product from a stale version.
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	return nil, domain.ErrVersionConflict
}
