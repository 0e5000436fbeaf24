package app_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// ---- cancel against ship

// checkCancelVsShip: for several orders, 4 cancels (by the owner) and 4 ships
// (by staff) race at the same version. Exactly one wins per order; if the
// cancel won the stock is back, if the ship won it stays taken.
func checkCancelVsShip(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	const rounds, each, stock, qty = 5, 4, 50, 3
	var broken []string
	for round := 0; round < rounds; round++ {
		customer := e.NewCustomer(1_000_000)
		product := e.NewProduct(testkit.ProductSpec{PriceCents: 10, Stock: stock})
		placed := as(e, customer).mustPlace("order", testkit.Line(product, qty))
		order, version := placed.ID(), placed.Version()
		var cancels, ships atomic.Int64
		done := m.Arm(t, e)
		testkit.Race(2*each, func(i int) {
			var err error
			if i%2 == 0 {
				_, err = as(e, customer).cancel(order, version)
			} else {
				_, err = as(e, e.Staff).ship(order, version)
			}
			switch c := code(err); {
			case err == nil && i%2 == 0:
				cancels.Add(1)
			case err == nil:
				ships.Add(1)
			case c != domain.CodeVersionConflict && c != domain.CodeInvalidTransition:
				found.Add("request %d: %v", i, err)
			}
		})
		done()
		status := orderStatus(e, order)
		left := stockOf(e, product)
		t.Logf("round %d: %d cancels and %d ships won, status %s, stock %d", round, cancels.Load(), ships.Load(), status, left)
		switch {
		case cancels.Load()+ships.Load() != 1:
			broken = append(broken, fmt.Sprintf("round %d: %d cancels and %d ships succeeded at one version", round, cancels.Load(), ships.Load()))
		case status == "cancelled" && left != stock, status == "shipped" && left != stock-qty:
			broken = append(broken, fmt.Sprintf("round %d: order %s but stock %d", round, status, left))
		}
	}
	return append(broken, found.List()...)
}

// TestRaceCancelVsShip: guarded, the first transition is held after its
// version-guarded UPDATE, with the order's row lock, until the 7 others wait
// on it; the naive transition writes without the version guard, and all 8
// meet before writing.
func TestRaceCancelVsShip(t *testing.T) {
	t.Parallel()
	testkit.RaceTest(t, checkCancelVsShip, testkit.Meet{Where: testkit.After, Statement: "OrderSetStatus", N: 8}, func(t *testing.T) (*testkit.Env, testkit.Meet) {
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
				return naiveTransition{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}
			}}
		}})
		return e, testkit.Meet{Where: testkit.Before, Statement: "NaiveSetStatus", N: 8}
	})
}

// naiveTransition writes the new status without checking that the order is
// still at the version the caller saw.
type naiveTransition struct {
	app.OrderRepo
	db dbsqlc.DBTX
}

func (n naiveTransition) SetStatus(ctx context.Context, o *domain.Order, expected domain.Version) (*domain.Order, error) {
	if _, err := n.db.Exec(ctx, "-- name: NaiveSetStatus\nUPDATE orders SET status = $2, version = version + 1 WHERE id = $1", o.ID(), o.Status().String()); err != nil {
		return nil, err
	}
	return n.Get(ctx, o.ID())
}

// ---- cancel against the first payment

// checkCancelVsFirstPayment races a cancellation against the first payment of
// a fresh order, in the two interleavings that break naive code, two rounds
// each. The invariant: a cancelled order takes no payment and a paid order is
// never cancelled, so at most one of the two succeeds and no order ends
// cancelled with paid_cents > 0 (its stock back on the shelf and its money
// kept).
//
//   - payment held: the payment has read the order (placed, nothing paid) and
//     is held after OrderGet while the cancel runs to its answer; then it goes
//     on. Its guarded increment (WHERE status <> 'cancelled') must refuse.
//   - cancel held: the cancel has read the order at version 1 and checked
//     that nothing is paid, and is held after OrderGet while the payment runs
//     to its answer; then it goes on. Its version guard must refuse.
func checkCancelVsFirstPayment(t *testing.T, e *testkit.Env) []string {
	var broken []string
	for round := range 4 {
		paymentHeld := round%2 == 0
		customer := e.NewCustomer(1_000_000)
		product := e.NewProduct(testkit.ProductSpec{PriceCents: 500, Stock: 10})
		placed := as(e, customer).mustPlace("order", testkit.Line(product, 1))
		order, version := placed.ID(), placed.Version()
		cancel := func() error {
			_, err := as(e, customer).cancel(order, version)
			return err
		}
		pay := func() error { return as(e, customer).pay(order, fmt.Sprintf("pay-%d", round), 500) }
		first, second, held := pay, cancel, "payment"
		if !paymentHeld {
			first, second, held = cancel, pay, "cancel"
		}
		stop := e.Hooks.StopFirst(testkit.After, "OrderGet", 1)
		out := make(chan error, 1)
		go func() { out <- first() }()
		stop.WaitArrived(t, 10*time.Second)
		other := second()
		stop.Release()
		r := <-out
		payErr, cancelErr := r, other
		if !paymentHeld {
			payErr, cancelErr = other, r
		}
		status := orderStatus(e, order)
		paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, order)
		stock := stockOf(e, product)
		t.Logf("round %d (%s held after reading): cancel %v, payment %v; order %s, paid %d, stock %d",
			round, held, cancelErr, payErr, status, paid, stock)
		for _, err := range []error{cancelErr, payErr} {
			if c := code(err); c != "" && c != domain.CodeVersionConflict && c != domain.CodeInvalidTransition {
				broken = append(broken, fmt.Sprintf("round %d: %v", round, err))
			}
		}
		if cancelErr == nil && payErr == nil {
			broken = append(broken, fmt.Sprintf("round %d (%s held): both the cancel and the payment succeeded", round, held))
		}
		if status == "cancelled" && paid > 0 {
			broken = append(broken, fmt.Sprintf("round %d (%s held): order cancelled with %d cents paid, stock %d back", round, held, paid, stock))
		}
	}
	return broken
}

// TestRaceCancelVsFirstPayment: the cancellation's version guard and the
// payment's status guard keep "a cancelled order takes no payment, a paid
// order is not cancelled" in both interleavings: the payment that read a
// placed order before the cancel committed gets invalid_transition, the
// cancel that read an unpaid order before the payment committed gets
// version_conflict. The naive variant (the transition written without its
// version guard, the payment's increment without its status guard, both
// relying on what the use case read) ends with cancelled, paid orders.
func TestRaceCancelVsFirstPayment(t *testing.T) {
	t.Parallel()
	testkit.InvariantTest(t, checkCancelVsFirstPayment, func(t *testing.T) *testkit.Env {
		return testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
				return naiveStatusGuards{naiveTransition{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}}
			}}
		}})
	})
}

// naiveStatusGuards is naiveTransition (no version guard on the status
// change) with a payment whose increment keeps paid_cents within the total
// but does not look at the status: it trusts the order the use case read.
type naiveStatusGuards struct{ naiveTransition }

func (n naiveStatusGuards) AddPayment(ctx context.Context, orderID, actorID uuid.UUID, amount domain.Cents) (*domain.Order, bool, error) {
	tag, err := n.db.Exec(ctx, `UPDATE orders SET paid_cents = paid_cents + $2, version = version + 1
		WHERE id = $1 AND paid_cents + $2 <= total_cents`, orderID, int64(amount))
	if err != nil || tag.RowsAffected() == 0 {
		return nil, false, err
	}
	if err := dbsqlc.New().PaymentInsert(ctx, n.db, dbsqlc.PaymentInsertParams{ID: uuid.New(), OrderID: orderID, ActorID: actorID, AmountCents: int64(amount)}); err != nil {
		return nil, false, err
	}
	o, err := n.Get(ctx, orderID)
	return o, err == nil, err
}
