package app_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
