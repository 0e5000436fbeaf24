package app

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// StaffOnly and CustomersOnly are the role rules of the use cases, exported
// for a transport that refuses a caller before it reads the request (the
// HTTP layer answers 403 before it asks for a key or a precondition). The
// use cases check them again: they stay the authority.
var (
	StaffOnly     = requireStaff
	CustomersOnly = requireCustomer
)

// requireCustomer refuses callers without the customer role.
func requireCustomer(p Principal) error {
	if p.Role != domain.RoleCustomer {
		return domain.Errorf(domain.CodeForbidden, "only customers place orders")
	}
	return nil
}

// requireStaff refuses callers without the staff role.
func requireStaff(p Principal) error {
	if !p.IsStaff() {
		return domain.Errorf(domain.CodeForbidden, "this operation needs the staff role")
	}
	return nil
}

// visibleOrder reads an order the caller may see. Another customer's order
// is reported as not found, so that its existence is not revealed.
func visibleOrder(ctx context.Context, repos Repositories, p Principal, id uuid.UUID) (*domain.Order, error) {
	o, err := repos.Orders().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !o.VisibleTo(p.ID, p.Role) {
		return nil, domain.ErrNotFound
	}
	return o, nil
}

// orderAtVersion reads an order the caller may see and checks that it is at
// one of the versions the caller's If-Match names. The guarded write that
// follows (OrderRepo.SetStatus) checks the version again, atomically.
func orderAtVersion(ctx context.Context, repos Repositories, p Principal, id uuid.UUID, expected []domain.Version) (*domain.Order, error) {
	o, err := visibleOrder(ctx, repos, p, id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(expected, o.Version()) {
		return nil, domain.ErrVersionConflict
	}
	return o, nil
}

// sortIDs puts product ids in the global lock order: every transaction that
// locks several stock rows locks them by ascending product id, so that two
// of them never wait for each other in a cycle.
func sortIDs(ids []uuid.UUID) {
	slices.SortFunc(ids, compareUUID)
}

func compareUUID(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
