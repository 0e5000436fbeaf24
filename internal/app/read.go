package app

import (
	"context"

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

// readOne runs a by-id read through r and returns its last answer: the
// replica's when it found the aggregate at a version no older than seen,
// else the primary's.
func readOne[T versioned](ctx context.Context, r Reader, seen Seen, get func(ctx context.Context, repos Repositories) (T, error)) (T, error) {
	var v T
	err := r.Read(ctx, func(ctx context.Context, repos Repositories) (err error) {
		v, err = get(ctx, repos)
		return err
	}, func() bool { return v.Version() >= domain.Version(seen) })
	return v, err
}

// readList runs a list read through r and returns its last answer.
func readList[T any](ctx context.Context, r Reader, list func(ctx context.Context, repos Repositories) ([]T, error)) ([]T, error) {
	var vs []T
	err := r.Read(ctx, func(ctx context.Context, repos Repositories) (err error) {
		vs, err = list(ctx, repos)
		return err
	}, nil)
	return vs, err
}
