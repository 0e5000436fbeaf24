package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// DeactivateActor stops an actor: its tokens stop working at once.
//
// Invariant: at least one active staff actor always remains. This is a write
// skew: two staff deactivating each other each see the other still active,
// and no single row lock covers "the set of active staff". Mechanism:
// SERIALIZABLE (pattern 7) with the runner's bounded, jittered
// whole-transaction retry; after the retry the loser sees the winner's commit
// and gets last_staff. Codes: forbidden, not_found, last_staff.
//
// Patterns and rule ids: docs/patterns.md.
type DeactivateActor struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// DeactivateActor is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) DeactivateActor() DeactivateActor {
	return DeactivateActor{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// DeactivateActorCommand is the input of DeactivateActor.
type DeactivateActorCommand struct {
	ID uuid.UUID
}

// Handle runs the command.
func (h DeactivateActor) Handle(ctx context.Context, cmd DeactivateActorCommand, call Call[domain.Actor]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, h.Latch, Serializable, call, func(ctx context.Context, repos Repositories) (domain.Actor, error) {
		a, err := repos.Actors().Get(ctx, cmd.ID)
		if err != nil {
			return domain.Actor{}, err
		}
		if a.Role == domain.RoleStaff && a.Active {
			others, err := repos.Actors().CountOtherActiveStaff(ctx, a.ID)
			if err != nil {
				return domain.Actor{}, err
			}
			if others == 0 {
				return domain.Actor{}, domain.Errorf(domain.CodeLastStaff, "actor %s is the last active staff member", a.ID)
			}
		}
		return repos.Actors().Deactivate(ctx, a.ID)
	})
}
