package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// StepwisePlacement is the plain placement store: the same repository calls
// as the pipelined one (placement.go), one statement at a time, on repos. It
// needs nothing but the repositories, so it serves any app.Repositories that
// cannot pipeline, the equivalence tests of the two paths, and a naive
// variant that replaces one repository and wants placement to go through it.
func StepwisePlacement(repos app.Repositories) app.PlacementStore {
	return stepwisePlacement{repos}
}

type stepwisePlacement struct{ repos app.Repositories }

func (s stepwisePlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	credit, err := s.repos.Actors().LockForOrder(ctx, customer)
	if err != nil || !credit.Active {
		return app.PlacementLocks{Credit: credit}, err
	}
	rows, err := s.repos.Stock().LockRows(ctx, ids)
	if err != nil {
		return app.PlacementLocks{}, err
	}
	return app.PlacementLocks{Credit: credit, Rows: rows}, nil
}

func (s stepwisePlacement) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	ok, err := s.repos.Actors().ChargeBalance(ctx, o.CustomerID(), o.Total())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, domain.ErrCreditRefused
	}
	if err := s.repos.Stock().AddStock(ctx, take); err != nil {
		return nil, err
	}
	return s.repos.Orders().Insert(ctx, o)
}
