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

// checkPayments: an order of 1000 gets 30 concurrent payments of 100 with
// distinct keys, plus 10 concurrent retries of one more key. paid_cents ends
// at exactly 1000, it equals the sum of the payment rows, 10 payments
// succeed and the rest get overpayment, and the retried key counts once.
func checkPayments(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 100})
	order := as(e, customer).mustPlace("order", testkit.Line(product, 10)).ID()
	const distinct, retried = 30, 10
	codes := make([]domain.Code, distinct+retried)
	done := m.Arm(t, e)
	testkit.Race(distinct+retried, func(i int) {
		key := fmt.Sprintf("pay-%d", i)
		if i >= distinct {
			key = "pay-retried"
		}
		err := as(e, customer).pay(order, key, 100)
		codes[i] = code(err)
		if err != nil && codes[i] != domain.CodeOverpayment {
			found.Add("payment %d: %v", i, err)
		}
	})
	done()
	paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, order)
	rows := e.QueryInt(`SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE order_id = $1`, order)
	payments := e.QueryInt(`SELECT count(*) FROM payments WHERE order_id = $1`, order)
	t.Logf("attempts %d, accepted %d, payments %d, paid_cents %d, sum of payments %d", len(codes), countCode(codes, ""), payments, paid, rows)
	var broken []string
	if paid > 1000 {
		broken = append(broken, fmt.Sprintf("paid_cents %d exceeds the total 1000", paid))
	}
	if paid != rows {
		broken = append(broken, fmt.Sprintf("paid_cents %d but payments sum to %d", paid, rows))
	}
	if paid != 1000 || payments != 10 {
		broken = append(broken, fmt.Sprintf("%d payments paid %d, want 10 paying 1000", payments, paid))
	}
	return append(broken, found.List()...)
}

// TestRacePayments: both runs meet before the payment row is inserted.
// Guarded, the first payment is there with the order's row lock taken by its
// guarded increment, and 11 others wait on it; the naive payment has only
// read paid_cents, and 12 meet before any writes.
func TestRacePayments(t *testing.T) {
	t.Parallel()
	at := testkit.Meet{Where: testkit.Before, Statement: "PaymentInsert", N: 12}
	testkit.RaceTest(t, checkPayments, at, func(t *testing.T) (*testkit.Env, testkit.Meet) {
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(repos app.Repositories) app.OrderRepo {
				return naivePayment{OrderRepo: repos.Orders(), db: testkit.Conn(repos)}
			}}
		}})
		e.Exec(`ALTER TABLE orders DROP CONSTRAINT orders_paid_within_total`)
		return e, at
	})
}

// naivePayment checks the balance and the status in the application and
// writes back the new paid_cents it computed.
type naivePayment struct {
	app.OrderRepo
	db dbsqlc.DBTX
}

func (n naivePayment) AddPayment(ctx context.Context, orderID, actorID uuid.UUID, amount domain.Cents) (*domain.Order, bool, error) {
	var paid, total int64
	var status string
	if err := n.db.QueryRow(ctx, `SELECT paid_cents, total_cents, status FROM orders WHERE id = $1`, orderID).Scan(&paid, &total, &status); err != nil {
		return nil, false, err
	}
	if paid+int64(amount) > total || status == "cancelled" {
		return nil, false, nil
	}
	if err := dbsqlc.New().PaymentInsert(ctx, n.db, dbsqlc.PaymentInsertParams{ID: uuid.New(), OrderID: orderID, ActorID: actorID, AmountCents: int64(amount)}); err != nil {
		return nil, false, err
	}
	if _, err := n.db.Exec(ctx, `UPDATE orders SET paid_cents = $2, version = version + 1 WHERE id = $1`, orderID, paid+int64(amount)); err != nil {
		return nil, false, err
	}
	o, err := n.Get(ctx, orderID)
	return o, err == nil, err
}
