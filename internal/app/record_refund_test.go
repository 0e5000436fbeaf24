package app_test

import (
	"context"
	"fmt"
	"testing"

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

// TestRefundCheckBacksTheGuard: with the guard's amount condition taken
// away (unguardedRefund), the CHECK orders_refund_within_paid refuses every
// refund beyond what was paid, and the caller gets over_refund, not a 500
// (orderConstraint gives the CHECK its meaning), so checkRefunds holds
// still. Without that meaning the refused refunds answer the driver's error,
// and the check fails; with the CHECK dropped too, TestRaceRefunds' naive run
// shows the over-refund.
func TestRefundCheckBacksTheGuard(t *testing.T) {
	t.Parallel()
	e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
			return unguardedRefund{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}
		}}
	}})
	e.CheckAtEnd()
	for _, b := range checkRefunds(t, e, testkit.Meet{Where: testkit.Before, Statement: "RefundInsert", N: 12}) {
		t.Error(b)
	}
}

// unguardedRefund is OrderAddRefund without its amount condition: the
// increment checks the status only, and the CHECK is all that stands
// between it and an over-refund.
type unguardedRefund struct {
	app.OrderRepo
	db dbsqlc.DBTX
}

func (n unguardedRefund) AddRefund(ctx context.Context, orderID, actorID uuid.UUID, r domain.Refund) (*domain.Order, bool, error) {
	tag, err := n.db.Exec(ctx, "-- name: UnguardedAddRefund\nUPDATE orders SET refunded_cents = refunded_cents + $2, version = version + 1 WHERE id = $1 AND status = 'cancelled'", orderID, int64(r.Amount))
	if err != nil || tag.RowsAffected() == 0 {
		return nil, false, err
	}
	if err := dbsqlc.New().RefundInsert(ctx, n.db, dbsqlc.RefundInsertParams{
		ID: uuid.New(), OrderID: orderID, ActorID: actorID, AmountCents: int64(r.Amount), Reason: r.Reason,
	}); err != nil {
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

// ---- a payment racing the cancellation, then refunds

// checkPaidIsRefundable runs the rounds of TestRaceCancelVsPayment and, once
// each ends, cancels the order if it is still placed, then refunds all it
// was paid and one cent more: a payment that raced the cancellation was
// either counted, and is then refundable in full, or refused; and never a
// cent beyond it is refunded.
func checkPaidIsRefundable(t *testing.T, e *testkit.Env) []string {
	var broken []string
	for round := range 4 {
		r := raceCancelVsPayment(t, e, round)
		broken = append(broken, r.broken(e)...)
		if orderStatus(e, r.order) == "placed" {
			version := e.QueryInt(`SELECT version FROM orders WHERE id = $1`, r.order)
			if _, err := as(e, e.Staff).cancel(r.order, domain.Version(version)); err != nil {
				broken = append(broken, fmt.Sprintf("round %d: cancel the order after the race: %v", round, err))
			}
		}
		paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, r.order)
		all := as(e, e.Staff).refund(r.order, fmt.Sprintf("refund-%d", round), max(paid, 1))
		more := as(e, e.Staff).refund(r.order, fmt.Sprintf("refund-more-%d", round), 1)
		t.Logf("round %d: refund of the %d paid %v, one more cent %v", round, paid, all, more)
		if paid > 0 && all != nil {
			broken = append(broken, fmt.Sprintf("round %d (%s held): the %d paid is not refundable: %v", round, r.held, paid, all))
		}
		if code(more) != domain.CodeOverRefund {
			broken = append(broken, fmt.Sprintf("round %d (%s held): a refund beyond the %d paid answered %v", round, r.held, paid, more))
		}
	}
	return broken
}

// TestRaceCancelVsPaymentLeavesThePaidRefundable: with the guards of
// TestRaceCancelVsPayment, what a payment racing the cancellation added is
// refundable, and nothing more. Its naive variant is that test's, and
// breaks the same way (the balance).
func TestRaceCancelVsPaymentLeavesThePaidRefundable(t *testing.T) {
	t.Parallel()
	testkit.InvariantTest(t, checkPaidIsRefundable, newNaiveCancelVsPayment)
}
