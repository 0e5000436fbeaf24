package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

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
		customer := e.NewActor("customer", 1_000_000)
		product := e.NewProduct(500, 10)
		res := placeOrder(e, customer.Token, "order", product, 1)
		if res.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", res.Status, res.Body)
		}
		order, tag := res.String("id"), res.Header.Get("ETag")
		cancel := func() *testkit.Response {
			return e.Do("POST", "/v1/orders/"+order+"/cancel", customer.Token, nil, "If-Match", tag)
		}
		pay := func() *testkit.Response {
			return e.Do("POST", "/v1/orders/"+order+"/payments", customer.Token, map[string]any{"amount_cents": 500},
				"Idempotency-Key", fmt.Sprintf("pay-%d", round))
		}
		first, second, held := pay, cancel, "payment"
		if !paymentHeld {
			first, second, held = cancel, pay, "cancel"
		}
		stop := e.Hooks.StopFirst(testkit.After, "OrderGet", 1)
		out := make(chan *testkit.Response, 1)
		go func() { out <- first() }()
		stop.WaitArrived(t, 10*time.Second)
		other := second()
		stop.Release()
		r := <-out
		payRes, cancelRes := r, other
		if !paymentHeld {
			payRes, cancelRes = other, r
		}
		status := orderStatus(t, e, order)
		paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, order)
		stock := stockOf(e, product)
		t.Logf("round %d (%s held after reading): cancel %d %s, payment %d %s; order %s, paid %d, stock %d",
			round, held, cancelRes.Status, cancelRes.Code(), payRes.Status, payRes.Code(), status, paid, stock)
		for _, x := range []*testkit.Response{cancelRes, payRes} {
			if x.Status >= 500 || x.Err != nil {
				broken = append(broken, fmt.Sprintf("round %d: %d %s %v", round, x.Status, x.Body, x.Err))
			}
		}
		if cancelRes.Status == http.StatusOK && payRes.Status == http.StatusCreated {
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
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t)
		e.CheckAtEnd()
		for _, b := range checkCancelVsFirstPayment(t, e) {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(tx app.Repositories) app.OrderRepo {
				return naiveStatusGuards{naiveTransition{OrderRepo: tx.Orders(), db: testkit.Conn(tx)}}
			}}
		}})
		broken := checkCancelVsFirstPayment(t, e)
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: this test cannot catch the race")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
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
