package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// insertOrder stores an order of 2 mugs and 1 plate (1,700 cents) through
// OrderRepo.Insert and returns it.
func insertOrder(b *repoBundle, id uuid.UUID) *domain.Order {
	b.t.Helper()
	var placed *domain.Order
	b.inTx(func(ctx context.Context, repos app.Repositories) (err error) {
		placed, err = repos.Orders().Insert(ctx, newOrder(b.t, id, line(mugID, mugPrice, 2), line(plateID, platePrice, 1)))
		return err
	})
	return placed
}

// Get reads the order with its lines, in one statement: the same order
// Insert returned, lines in order; a missing order is not_found.
func TestOrderGetReadsWhatInsertWrote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	placed := insertOrder(b, orderID)
	got, err := b.repos.Orders().Get(b.ctx, orderID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Total() != 1700 || got.Status() != domain.StatusPlaced || got.Version() != 1 ||
		len(got.Lines()) != 2 || got.Lines()[0] != placed.Lines()[0] || got.Lines()[1] != placed.Lines()[1] ||
		!got.CreatedAt().Equal(placed.CreatedAt()) {
		t.Errorf("read %+v, inserted %+v", got, placed)
	}
	if _, err := b.repos.Orders().Get(b.ctx, uuid.New()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("missing order: %v, want not_found", err)
	}
}

// OrderSetStatus is guarded by the version: a stale one updates no row and
// is version_conflict (the order was read in the same transaction, so it
// exists); the stored status does not change.
func TestOrderSetStatusGuardedByVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insertOrder(b, orderID)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		o, err := repos.Orders().Get(ctx, orderID)
		if err != nil {
			return err
		}
		if err := o.Ship(); err != nil {
			return err
		}
		if _, err := repos.Orders().SetStatus(ctx, o, o.Version()+1); !errors.Is(err, domain.ErrVersionConflict) {
			t.Errorf("stale version: %v, want version_conflict", err)
		}
		return nil
	})
	if n := b.queryInt(`SELECT count(*) FROM orders WHERE status = 'placed' AND version = 1`); n != 1 {
		t.Errorf("a refused status change changed the order")
	}
}

// OrderAddPayment refuses in one guarded statement a payment past the total
// or on a cancelled order: zero rows, reported as false, nothing recorded.
func TestOrderAddPaymentGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insertOrder(b, orderID)
	pay := func(id uuid.UUID, amount domain.Cents) bool {
		t.Helper()
		var ok bool
		b.inTx(func(ctx context.Context, repos app.Repositories) (err error) {
			_, ok, err = repos.Orders().AddPayment(ctx, id, customerID, amount)
			return err
		})
		return ok
	}
	if !pay(orderID, 1000) {
		t.Fatal("a payment within the total was refused")
	}
	if pay(orderID, 701) {
		t.Error("a payment past the total was taken")
	}

	other := uuid.MustParse("00000000-0000-7000-8000-0000000000b2")
	insertOrder(b, other)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		o, err := repos.Orders().Get(ctx, other)
		if err != nil {
			return err
		}
		expected := o.Version()
		if err := o.Cancel(); err != nil {
			return err
		}
		_, err = repos.Orders().SetStatus(ctx, o, expected)
		return err
	})
	if pay(other, 1) {
		t.Error("a payment on a cancelled order was taken")
	}
	if paid, n := b.queryInt(`SELECT sum(paid_cents) FROM orders`), b.queryInt(`SELECT count(*) FROM payments`); paid != 1000 || n != 1 {
		t.Errorf("paid %d in %d payments, want 1000 in 1", paid, n)
	}
}
