package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

func (c caller) refund(order uuid.UUID, key string, amount int64) error {
	cmd := app.RecordRefundCommand{OrderID: order, Refund: domain.Refund{Amount: domain.Cents(amount), Reason: "order cancelled"}}
	ctx, cl, _ := call[app.RefundRecorded](c, "recordRefund", key, cmd)
	_, err := c.e.App.RecordRefund().Handle(ctx, cmd, cl)
	return err
}

// paidAndCancelled places an order of total, pays paid of it and cancels
// it: paid is then refundable.
func paidAndCancelled(e *testkit.Env, customer testkit.Actor, total, paid int64) uuid.UUID {
	e.T.Helper()
	product := e.NewProduct(testkit.ProductSpec{PriceCents: total, Stock: 1})
	o := as(e, customer).mustPlace("order-"+product, testkit.Line(product, 1))
	if err := as(e, customer).pay(o.ID(), "pay-"+product, paid); err != nil {
		e.T.Fatalf("pay: %v", err)
	}
	if _, err := as(e, customer).cancel(o.ID(), o.Version()+1); err != nil {
		e.T.Fatalf("cancel a paid order: %v", err)
	}
	return o.ID()
}

// checkRefunds: a cancelled order that was paid 1000 gets 30 concurrent
// refunds of 100 with distinct keys, plus 10 concurrent retries of one more
// key. refunded_cents ends at exactly 1000, it equals the sum of the refund
// rows, 10 refunds succeed and the rest get over_refund, the retried key
// counts once, and the customer's balance does not move (a cancelled order
// owes nothing).
func checkRefunds(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	customer := e.NewCustomer(1_000_000)
	order := paidAndCancelled(e, customer, 1000, 1000)
	const distinct, retried = 30, 10
	codes := make([]domain.Code, distinct+retried)
	done := m.Arm(t, e)
	testkit.Race(distinct+retried, func(i int) {
		key := fmt.Sprintf("refund-%d", i)
		if i >= distinct {
			key = "refund-retried"
		}
		err := as(e, e.Staff).refund(order, key, 100)
		codes[i] = code(err)
		if err != nil && codes[i] != domain.CodeOverRefund {
			found.Add("refund %d: %v", i, err)
		}
	})
	done()
	refunded := e.QueryInt(`SELECT refunded_cents FROM orders WHERE id = $1`, order)
	rows := e.QueryInt(`SELECT coalesce(sum(amount_cents), 0) FROM refunds WHERE order_id = $1`, order)
	refunds := e.QueryInt(`SELECT count(*) FROM refunds WHERE order_id = $1`, order)
	balance := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID)
	t.Logf("attempts %d, accepted %d, refunds %d, refunded_cents %d, sum of refunds %d, balance %d",
		len(codes), countCode(codes, ""), refunds, refunded, rows, balance)
	var broken []string
	if refunded > 1000 || rows > 1000 {
		broken = append(broken, fmt.Sprintf("refunded_cents %d, refunds summing to %d: more than the 1000 paid", refunded, rows))
	}
	if refunded != rows {
		broken = append(broken, fmt.Sprintf("refunded_cents %d but refunds sum to %d", refunded, rows))
	}
	if refunded != 1000 || refunds != 10 {
		broken = append(broken, fmt.Sprintf("%d refunds refunded %d, want 10 refunding 1000", refunds, refunded))
	}
	if balance != 0 {
		broken = append(broken, fmt.Sprintf("balance %d after refunds of a cancelled order, want 0", balance))
	}
	return append(broken, found.List()...)
}

// TestRaceRefunds: both runs meet before the refund row is inserted.
// Guarded, the first refund is there with the order's row lock taken by its
// guarded increment, and 11 others wait on it; the naive refund has only
// read refunded_cents, and 12 meet before any writes (the CHECK that backs
// the guard is dropped, so only the use case's own check is left).
func TestRaceRefunds(t *testing.T) {
	t.Parallel()
	at := testkit.Meet{Where: testkit.Before, Statement: "RefundInsert", N: 12}
	testkit.RaceTest(t, checkRefunds, at, func(t *testing.T) (*testkit.Env, testkit.Meet) {
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
				return naiveRefund{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}
			}}
		}})
		e.Exec(`ALTER TABLE orders DROP CONSTRAINT orders_refund_within_paid`)
		return e, at
	})
}

// naiveRefund checks the status and what is left to refund in the
// application and writes back the refunded_cents it computed.
type naiveRefund struct {
	app.OrderRepo
	db dbsqlc.DBTX
}

func (n naiveRefund) AddRefund(ctx context.Context, orderID, actorID uuid.UUID, r domain.Refund) (*domain.Order, bool, error) {
	var paid, refunded int64
	var status string
	if err := n.db.QueryRow(ctx, `SELECT paid_cents, refunded_cents, status FROM orders WHERE id = $1`, orderID).Scan(&paid, &refunded, &status); err != nil {
		return nil, false, err
	}
	if refunded+int64(r.Amount) > paid || status != "cancelled" {
		return nil, false, nil
	}
	if err := dbsqlc.New().RefundInsert(ctx, n.db, dbsqlc.RefundInsertParams{
		ID: uuid.New(), OrderID: orderID, ActorID: actorID, AmountCents: int64(r.Amount), Reason: r.Reason,
	}); err != nil {
		return nil, false, err
	}
	if _, err := n.db.Exec(ctx, `UPDATE orders SET refunded_cents = $2, version = version + 1 WHERE id = $1`, orderID, refunded+int64(r.Amount)); err != nil {
		return nil, false, err
	}
	o, err := n.Get(ctx, orderID)
	return o, err == nil, err
}

// TestRefundRules: only a cancelled order is refunded, only by staff, never
// beyond what was paid, and a refund moves no balance.
func TestRefundRules(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	e.CheckAtEnd()
	customer := e.NewCustomer(1_000_000)
	staff := as(e, e.Staff)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 1000, Stock: 10})
	placed := as(e, customer).mustPlace("placed", testkit.Line(product, 1))
	if err := as(e, customer).pay(placed.ID(), "pay-placed", 400); err != nil {
		t.Fatal(err)
	}
	other := paidAndCancelled(e, customer, 500, 1)
	order := paidAndCancelled(e, customer, 800, 300)
	steps := []struct {
		what string
		err  error
		want domain.Code
	}{
		{"refund a placed order", staff.refund(placed.ID(), "r1", 1), domain.CodeInvalidTransition},
		{"a customer refunding", as(e, customer).refund(order, "r2", 1), domain.CodeForbidden},
		{"refund an unknown order", staff.refund(uuid.New(), "r3", 1), domain.CodeNotFound},
		{"refund beyond what was paid", staff.refund(order, "r4", 301), domain.CodeOverRefund},
		{"refund part", staff.refund(order, "r5", 100), ""},
		{"refund the part again (replayed)", staff.refund(order, "r5", 100), ""},
		{"refund the rest and one more", staff.refund(order, "r6", 201), domain.CodeOverRefund},
		{"refund the rest", staff.refund(order, "r7", 200), ""},
		{"refund a fully refunded order", staff.refund(order, "r8", 1), domain.CodeOverRefund},
		{"refund the 1 paid on another order", staff.refund(other, "r9", 1), ""},
	}
	for _, s := range steps {
		if got := code(s.err); got != s.want {
			t.Errorf("%s: %v, want code %q", s.what, s.err, s.want)
		}
	}
	if got := e.QueryInt(`SELECT refunded_cents FROM orders WHERE id = $1`, order); got != 300 {
		t.Errorf("refunded_cents %d, want 300", got)
	}
	// The placed order still owes 600; the cancelled ones owe nothing.
	if got := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID); got != 600 {
		t.Errorf("balance %d, want 600", got)
	}
	if got := e.QueryInt(`SELECT count(*) FROM outbox_events WHERE type = 'refund.recorded'`); got != 3 {
		t.Errorf("%d refund.recorded events, want 3 (one per refund)", got)
	}
}

// ---- cancel against a payment

// checkCancelVsPayment races a cancellation against a payment of part of a
// fresh order, in the two interleavings that break naive code, two rounds
// each. The invariant: a payment racing the cancellation is either counted
// before it, and then refundable, or refused; and the customer's balance
// stays exactly what their placed and shipped orders owe, so the cancel
// releases only what was still owed once the payment is counted. The
// customer has a second order of 700 that stays placed, so their balance
// ends at exactly 700.
//
//   - payment held: the payment has read the order (placed, nothing paid) and
//     is held after OrderGet while the cancel runs to its answer; then it goes
//     on. Its guarded increment (WHERE status <> 'cancelled') must refuse.
//   - cancel held: the cancel has read the order at version 1 with nothing
//     paid, and is held after OrderGet while the payment runs to its answer;
//     then it goes on. Its version guard must refuse, and the caller's retry
//     with the order's new version cancels it, releasing only the 300 still
//     owed of the 500.
//
// Either way the order ends cancelled, and what it was paid is refunded in
// full and not a cent more.
func checkCancelVsPayment(t *testing.T, e *testkit.Env) []string {
	var broken []string
	for round := range 4 {
		paymentHeld := round%2 == 0
		customer := e.NewCustomer(1_000_000)
		product, ballast := e.NewProduct(testkit.ProductSpec{PriceCents: 500, Stock: 10}), e.NewProduct(testkit.ProductSpec{PriceCents: 700, Stock: 10})
		as(e, customer).mustPlace("ballast", testkit.Line(ballast, 1))
		placed := as(e, customer).mustPlace("order", testkit.Line(product, 1))
		order, version := placed.ID(), placed.Version()
		cancel := func() error {
			_, err := as(e, customer).cancel(order, version)
			return err
		}
		pay := func() error { return as(e, customer).pay(order, fmt.Sprintf("pay-%d", round), 200) }
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
		retried := ""
		if code(cancelErr) == domain.CodeVersionConflict {
			retried = " (version_conflict, retried at the new version)"
			// The caller reads the order again and cancels it at its version.
			now := e.QueryInt(`SELECT version FROM orders WHERE id = $1`, order)
			_, cancelErr = as(e, customer).cancel(order, domain.Version(now))
		}
		status := orderStatus(e, order)
		paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, order)
		payments := e.QueryInt(`SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE order_id = $1`, order)
		balance := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID)
		refundAll := as(e, e.Staff).refund(order, fmt.Sprintf("refund-%d", round), max(paid, 1))
		refundMore := as(e, e.Staff).refund(order, fmt.Sprintf("refund-more-%d", round), 1)
		t.Logf("round %d (%s held after reading): cancel %v%s, payment %v; order %s, paid %d, balance %d; refund of what was paid %v, one more cent %v",
			round, held, cancelErr, retried, payErr, status, paid, balance, refundAll, refundMore)
		for _, err := range []error{cancelErr, payErr} {
			if c := code(err); c != "" && c != domain.CodeInvalidTransition {
				broken = append(broken, fmt.Sprintf("round %d: %v", round, err))
			}
		}
		switch {
		case status != "cancelled":
			broken = append(broken, fmt.Sprintf("round %d (%s held): order %s, not cancelled", round, held, status))
		case paid != payments:
			broken = append(broken, fmt.Sprintf("round %d (%s held): paid_cents %d but payments sum to %d", round, held, paid, payments))
		case payErr == nil && paid != 200, payErr != nil && paid != 0:
			broken = append(broken, fmt.Sprintf("round %d (%s held): payment answered %v but %d is paid", round, held, payErr, paid))
		case balance != 700:
			broken = append(broken, fmt.Sprintf("round %d (%s held): balance %d, but the customer owes 700 (the order left placed)", round, held, balance))
		}
		if paid > 0 && refundAll != nil {
			broken = append(broken, fmt.Sprintf("round %d (%s held): the %d paid is not refundable: %v", round, held, paid, refundAll))
		}
		if code(refundMore) != domain.CodeOverRefund {
			broken = append(broken, fmt.Sprintf("round %d (%s held): a refund beyond the %d paid answered %v", round, held, paid, refundMore))
		}
	}
	return broken
}

// TestRaceCancelVsPayment: the cancellation's version guard and the
// payment's status guard keep the payment either counted and refundable or
// refused, and the balance exact, in both interleavings: the payment that
// read a placed order before the cancel committed gets invalid_transition;
// the cancel that read an unpaid order before the payment committed gets
// version_conflict, and its retry releases only the 300 still owed. The
// naive variant (the transition written without its version guard and
// trusting the order as it read it, the payment's increment without its
// status guard) releases the 500 on top of the 200 paid, or takes a payment
// after the cancellation released everything: either way the balance is
// 200 short.
func TestRaceCancelVsPayment(t *testing.T) {
	t.Parallel()
	testkit.InvariantTest(t, checkCancelVsPayment, func(t *testing.T) *testkit.Env {
		return testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
				return naiveCancelTrustsRead{naiveStatusGuards{naiveTransition{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}}}
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
