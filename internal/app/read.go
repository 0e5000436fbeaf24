package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// Seen is the newest version of a resource that the caller says it holds
// (the tags of its If-None-Match); zero when it names none. A replica's
// answer older than that is not current: the caller has seen a later write
// (its own PATCH, or the version a webhook led it to), and the read goes to
// the primary.
type Seen domain.Version

// versioned is an aggregate that carries its persistence version.
type versioned interface{ Version() domain.Version }

// readOne runs a by-id read through r, with the request's token check
// auth, and returns its last answer: the
// replica's when it found the aggregate at a version no older than seen,
// else the primary's.
func readOne[T versioned](ctx context.Context, r Reader, auth *AuthCheck, seen Seen, get func(ctx context.Context, repos Repositories) (T, error)) (T, error) {
	var v T
	err := r.Read(ctx, auth, func(ctx context.Context, repos Repositories) (err error) {
		v, err = get(ctx, repos)
		return err
	}, func() bool { return v.Version() >= domain.Version(seen) })
	return v, err
}

// readList runs a list read through r and returns its last answer.
func readList[T any](ctx context.Context, r Reader, auth *AuthCheck, list func(ctx context.Context, repos Repositories) ([]T, error)) ([]T, error) {
	var vs []T
	err := r.Read(ctx, auth, func(ctx context.Context, repos Repositories) (err error) {
		vs, err = list(ctx, repos)
		return err
	}, nil)
	return vs, err
}

// readByID is readOne of the aggregate that get finds by id in the
// repository repo picks: GetProduct reads with (Repositories.Products,
// ProductRepo.Get), GetStock with (Repositories.Stock, StockRepo.Get).
func readByID[R any, T versioned](ctx context.Context, r Reader, auth *AuthCheck, seen Seen, id uuid.UUID, repo func(Repositories) R, get func(R, context.Context, uuid.UUID) (T, error)) (T, error) {
	return readOne(ctx, r, auth, seen, func(ctx context.Context, repos Repositories) (T, error) {
		return get(repo(repos), ctx, id)
	})
}

// readPage is readList of the page that list reads from the repository repo
// picks: ListProducts reads with (Repositories.Products, ProductRepo.List),
// ListStock with (Repositories.Stock, StockRepo.List).
func readPage[R, T any](ctx context.Context, r Reader, auth *AuthCheck, page Page, repo func(Repositories) R, list func(R, context.Context, Page) ([]T, error)) ([]T, error) {
	return readList(ctx, r, auth, func(ctx context.Context, repos Repositories) ([]T, error) {
		return list(repo(repos), ctx, page)
	})
}
