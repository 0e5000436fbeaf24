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

// ---- cancel against a payment

// cancelPaymentRound is one round of the race between a cancellation and a
// payment of 200 on a fresh order of 500, whose customer has a second order
// of 700 that stays placed. Round by round, one of the two is held after it
// has read the order (after OrderGet) while the other runs to its answer:
//
//   - payment held: the payment has read a placed order with nothing paid;
//     the cancel commits. The payment's guarded increment (WHERE status <>
//     'cancelled') must then refuse.
//   - cancel held: the cancel has read the order at version 1 with nothing
//     paid; the payment commits. The cancel's version guard must then
//     refuse, and the caller retries at the order's new version.
type cancelPaymentRound struct {
	round             int
	held              string // "payment" or "cancel"
	order             uuid.UUID
	cancelErr, payErr error // the cancel's after its retry, if it was retried
	retried           bool
}

// raceCancelVsPayment runs round on e.
func raceCancelVsPayment(t *testing.T, e *testkit.Env, round int) cancelPaymentRound {
	r := cancelPaymentRound{round: round, held: "payment"}
	if round%2 == 1 {
		r.held = "cancel"
	}
	customer := e.NewCustomer(1_000_000)
	product, ballast := e.NewProduct(testkit.ProductSpec{PriceCents: 500, Stock: 10}), e.NewProduct(testkit.ProductSpec{PriceCents: 700, Stock: 10})
	as(e, customer).mustPlace("ballast", testkit.Line(ballast, 1))
	placed := as(e, customer).mustPlace("order", testkit.Line(product, 1))
	r.order = placed.ID()
	cancel := func() error {
		_, err := as(e, customer).cancel(r.order, placed.Version())
		return err
	}
	pay := func() error { return as(e, customer).pay(r.order, fmt.Sprintf("pay-%d", round), 200) }
	first, second := pay, cancel
	if r.held == "cancel" {
		first, second = cancel, pay
	}
	stop := e.Hooks.StopFirst(testkit.After, "OrderGet", 1)
	out := make(chan error, 1)
	go func() { out <- first() }()
	stop.WaitArrived(t, 10*time.Second)
	other := second()
	stop.Release()
	r.payErr, r.cancelErr = <-out, other
	if r.held == "cancel" {
		r.payErr, r.cancelErr = other, r.payErr
	}
	if code(r.cancelErr) == domain.CodeVersionConflict {
		// The caller reads the order again and cancels it at its version.
		r.retried = true
		now := e.QueryInt(`SELECT version FROM orders WHERE id = $1`, r.order)
		_, r.cancelErr = as(e, customer).cancel(r.order, domain.Version(now))
	}
	return r
}

// broken says how the round's end breaks the invariant: what was
// acknowledged is what is stored, and nothing else. The operation that was
// not held ran alone on a placed order with nothing paid, so it succeeds
// under any rule. A payment answered 201 is counted and one refused is
// not. The acknowledged operations, applied one after the other in some
// order to the order as placed, by the domain's own rules (Order.Cancel,
// Order.CheckPayment), end where the database did, and from there the
// domain refuses each refused one with the code it got; and the customer's
// balance is what their orders owe (the order left placed 700, this one
// nothing once cancelled, else what is still unpaid of it). Whether a paid
// order may be cancelled is the domain's to say: this check holds whichever
// way its rule goes, and so does the naive variant's failure.
func (r cancelPaymentRound) broken(e *testkit.Env) []string {
	var broken []string
	fail := func(format string, args ...any) {
		broken = append(broken, fmt.Sprintf("round %d (%s held): ", r.round, r.held)+fmt.Sprintf(format, args...))
	}
	status := orderStatus(e, r.order)
	paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, r.order)
	payments := e.QueryInt(`SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE order_id = $1`, r.order)
	balance := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = (SELECT customer_id FROM orders WHERE id = $1)`, r.order)
	e.T.Logf("round %d (%s held after reading): cancel %v (retried %v), payment %v; order %s, paid %d, balance %d",
		r.round, r.held, r.cancelErr, r.retried, r.payErr, status, paid, balance)
	answers := map[string]error{"cancel": r.cancelErr, "pay": r.payErr}
	var acked, refused []string
	for _, op := range []string{"cancel", "pay"} {
		if answers[op] == nil {
			acked = append(acked, op)
		} else {
			refused = append(refused, op)
		}
	}
	unheld := map[string]string{"payment": "cancel", "cancel": "pay"}[r.held]
	owed := 500 - paid
	if status == "cancelled" {
		owed = 0
	}
	end, explained := serialEnd(acked, status, domain.Cents(paid))
	switch {
	case answers[unheld] != nil:
		fail("the %s ran alone on a placed, unpaid order and was refused: %v", unheld, answers[unheld])
	case paid != payments:
		fail("paid_cents %d but payments sum to %d", paid, payments)
	case r.payErr == nil && paid != 200, r.payErr != nil && paid != 0:
		fail("payment answered %v but %d is paid", r.payErr, paid)
	case !explained:
		fail("order %s with %d paid after %v: no order of them gives that by the domain's rules", status, paid, acked)
	case balance != 700+owed:
		fail("balance %d, but the customer owes %d (700 on the order left placed)", balance, 700+owed)
	}
	for _, op := range refused {
		if !explained {
			break // already reported: there is no end to refuse from
		}
		if _, err := apply(end, op); code(err) != code(answers[op]) {
			fail("the %s was refused with %v, where the domain, after %v, answers %v", op, answers[op], acked, err)
		}
	}
	return broken
}

// apply is op (cancel, or pay 200) on the order o by the domain's rules,
// and what it leaves.
func apply(o domain.OrderRecord, op string) (domain.OrderRecord, error) {
	order := domain.RehydrateOrder(o)
	if op == "cancel" {
		err := order.Cancel()
		o.Status = order.Status()
		return o, err
	}
	if err := order.CheckPayment(200); err != nil {
		return o, err
	}
	o.Paid += 200
	return o, nil
}

// serialEnd applies the acknowledged operations one after the other, in
// each order, to a placed order of 500 with nothing paid, each allowed by
// the domain's rules, and returns the end of the first order that ends with
// status and paid, and whether one does.
func serialEnd(acked []string, status string, paid domain.Cents) (domain.OrderRecord, bool) {
	orders := [][]string{acked}
	if len(acked) == 2 {
		orders = append(orders, []string{acked[1], acked[0]})
	}
	for _, sequence := range orders {
		o, err := domain.OrderRecord{Status: domain.StatusPlaced, Total: 500, Version: 1}, error(nil)
		for _, op := range sequence {
			if o, err = apply(o, op); err != nil {
				break
			}
		}
		if err == nil && o.Status.String() == status && o.Paid == paid {
			return o, true
		}
	}
	return domain.OrderRecord{}, false
}

// checkCancelVsPayment runs four rounds, two of each interleaving.
func checkCancelVsPayment(t *testing.T, e *testkit.Env) []string {
	var broken []string
	for round := range 4 {
		broken = append(broken, raceCancelVsPayment(t, e, round).broken(e)...)
	}
	return broken
}

// TestRaceCancelVsPayment: the cancellation's version guard and the
// payment's status guard keep what was acknowledged exactly what is stored,
// and the balance exact, in both interleavings: the payment that read a
// placed order before the cancel committed gets invalid_transition; the
// cancel that read an unpaid order before the payment committed gets
// version_conflict, and its retry is decided on the order as it now is. The
// naive variant (newNaiveCancelVsPayment) releases the 500 on top of the 200
// paid, or takes a payment after the cancellation released everything:
// either way the balance is 200 short.
func TestRaceCancelVsPayment(t *testing.T) {
	t.Parallel()
	testkit.InvariantTest(t, checkCancelVsPayment, newNaiveCancelVsPayment)
}

// newNaiveCancelVsPayment is a service whose status change has no version
// guard and returns the order as the use case read it (so the cancellation
// releases what was owed when it read), and whose payment increment keeps
// paid_cents within the total but does not look at the status.
func newNaiveCancelVsPayment(t *testing.T) *testkit.Env {
	return testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
			return naiveCancelTrustsRead{naiveStatusGuards{naiveTransition{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}}}
		}}
	}})
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

// naiveCancelTrustsRead is naiveStatusGuards whose status change also
// returns the order as the use case read it: the cancellation then releases
// what was owed when it read, not what is owed now.
type naiveCancelTrustsRead struct{ naiveStatusGuards }

func (n naiveCancelTrustsRead) SetStatus(ctx context.Context, o *domain.Order, expected domain.Version) (*domain.Order, error) {
	if _, err := n.db.Exec(ctx, "-- name: NaiveSetStatus\nUPDATE orders SET status = $2, version = version + 1 WHERE id = $1", o.ID(), o.Status().String()); err != nil {
		return nil, err
	}
	return o, nil
}
