package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// ActorChargeBalance refuses in one guarded statement to take the balance
// past the credit limit (ADR 0007): the statement fails (the transaction
// can only roll back), reported as false, and the balance stays. ActorReleaseBalance refuses to go below zero, which only a
// balance that differs from its orders can cause: an error that says to run
// api check.
func TestActorBalanceGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	errRefused := errors.New("refused")
	charge := func(amount domain.Cents) bool {
		t.Helper()
		var ok bool
		err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) (err error) {
			if ok, err = repos.Actors().ChargeBalance(ctx, customerID, amount); err == nil && !ok {
				// The refusal failed the statement: the transaction is
				// aborted.
				if _, err := repos.Actors().LockForOrder(ctx, customerID); err == nil {
					t.Error("the transaction went on after a refused charge")
				}
				return errRefused
			}
			return err
		})
		if err != nil && !errors.Is(err, errRefused) {
			t.Fatal(err)
		}
		return ok
	}
	if !charge(creditLimit - 1) {
		t.Fatal("a charge within the limit was refused")
	}
	if charge(2) {
		t.Error("a charge past the limit was taken")
	}
	if got := b.queryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customerID); got != creditLimit-1 {
		t.Errorf("balance %d, want %d", got, creditLimit-1)
	}

	err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) error {
		return repos.Actors().ReleaseBalance(ctx, customerID, creditLimit)
	})
	if err == nil || !strings.Contains(err.Error(), "api check") {
		t.Fatalf("release of more than the balance: %v, want the refusal", err)
	}
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		return repos.Actors().ReleaseBalance(ctx, customerID, creditLimit-1)
	})
	if got := b.queryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customerID); got != 0 {
		t.Errorf("balance %d after releasing it all", got)
	}
}

// LockForOrder of an unknown actor is not_found; ByTokenHash of an unknown
// token is not_found, of a known one the actor, active until deactivated.
func TestActorLookups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		credit, err := repos.Actors().LockForOrder(ctx, customerID)
		if err != nil || credit != (domain.Credit{Limit: creditLimit, Active: true}) {
			t.Errorf("credit %+v, %v", credit, err)
		}
		if _, err := repos.Actors().LockForOrder(ctx, uuid.New()); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("unknown actor: %v, want not_found", err)
		}
		return nil
	})
	if _, err := b.repos.Actors().ByTokenHash(b.ctx, make([]byte, 32)); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown token: %v, want not_found", err)
	}
	hash := sha256.Sum256([]byte(customerID.String()))
	p, err := b.repos.Actors().ByTokenHash(b.ctx, hash[:])
	if err != nil || p != (app.Principal{ID: customerID, Role: domain.RoleCustomer, Active: true}) {
		t.Errorf("principal %+v, %v", p, err)
	}
	if _, err := b.repos.Actors().Deactivate(b.ctx, customerID); err != nil {
		t.Fatal(err)
	}
	if p, err := b.repos.Actors().ByTokenHash(b.ctx, hash[:]); err != nil || p.Active {
		t.Errorf("after deactivation: %+v, %v", p, err)
	}
}
