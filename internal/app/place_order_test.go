package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// ---- no overselling

// checkNoOversell: stock 10, 100 concurrent single-unit orders from 100
// customers (so that only the stock row is shared). Exactly 10 succeed, the
// other 90 get insufficient_stock, and stock ends at 0.
func checkNoOversell(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	const n, stock = 100, 10
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: stock})
	customers := make([]testkit.Actor, n)
	for i := range customers {
		customers[i] = e.NewCustomer(1_000_000)
	}
	codes := make([]domain.Code, n)
	done := m.Arm(t, e)
	testkit.Race(n, func(i int) {
		_, err := as(e, customers[i]).place("k", testkit.Line(product, 1))
		codes[i] = code(err)
		if err != nil && codes[i] != domain.CodeInsufficientStock {
			found.Add("order %d: %v", i, err)
		}
	})
	done()
	var broken []string
	ok := countCode(codes, "")
	left := stockOf(e, product)
	sold := e.QueryInt(`SELECT coalesce(sum(quantity), 0) FROM order_lines WHERE product_id = $1`, product)
	t.Logf("attempts %d, successes %d, final stock %d, units on orders %d", n, ok, left, sold)
	if ok != stock {
		broken = append(broken, fmt.Sprintf("%d orders succeeded for %d units of stock", ok, stock))
	}
	if left != 0 || sold != stock {
		broken = append(broken, fmt.Sprintf("stock %d and %d units sold, want 0 and %d", left, sold, stock))
	}
	return append(broken, found.List()...)
}

// betweenReadAndWrite is a placement's meeting point: its reads (and, when
// guarded, its locks) are done, its writes not yet sent.
func betweenReadAndWrite(n int) testkit.Meet {
	return testkit.Meet{Where: testkit.Before, Statement: "OrderInsert", N: n}
}

// TestRaceNoOversell: guarded, the first placement is held with its stock
// row lock until 11 others wait on that lock; the naive placement reads the
// stock without a lock, and 12 placements meet after their reads.
func TestRaceNoOversell(t *testing.T) {
	t.Parallel()
	testkit.RaceTest(t, checkNoOversell, betweenReadAndWrite(12), func(t *testing.T) (*testkit.Env, testkit.Meet) {
		e := withNaivePlacement(t, naivePlacement{lockStock: false, lostUpdate: true})
		// The CHECK constraint is the last line of defence; without it the
		// naive variant shows what the locks alone prevent.
		e.Exec(`ALTER TABLE stock_levels DROP CONSTRAINT stock_levels_stock_nonnegative`)
		return e, betweenReadAndWrite(12)
	})
}

// ---- reversed lines never deadlock

// checkReversedLines: rounds of two concurrent two-line orders, one A then B,
// the other B then A. Every one succeeds, no deadlock happens (not even one
// the runner would retry), and the stock adds up.
func checkReversedLines(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	const rounds, stock = 10, 10_000
	a, b := e.NewProduct(testkit.ProductSpec{PriceCents: 10, Stock: stock}), e.NewProduct(testkit.ProductSpec{PriceCents: 10, Stock: stock})
	ok := 0
	for round := range rounds {
		customers := [2]testkit.Actor{e.NewCustomer(1_000_000), e.NewCustomer(1_000_000)}
		codes := make([]domain.Code, 2)
		done := m.Arm(t, e)
		testkit.Race(2, func(i int) {
			var err error
			if i == 0 {
				_, err = as(e, customers[i]).place("k", testkit.Line(a, 1), testkit.Line(b, 2))
			} else {
				_, err = as(e, customers[i]).place("k", testkit.Line(b, 2), testkit.Line(a, 1))
			}
			codes[i] = code(err)
			if err != nil {
				found.Add("round %d order %d: %v", round, i, err)
			}
		})
		done()
		ok += countCode(codes, "")
	}
	var broken []string
	deadlocks := e.Metric("ordersvc_tx_retries_total", "sqlstate", "40P01")
	sa := stockOf(e, a)
	sb := stockOf(e, b)
	t.Logf("attempts %d, successes %d, deadlocks retried %v, stock A %d B %d", 2*rounds, ok, deadlocks, sa, sb)
	if deadlocks > 0 {
		broken = append(broken, fmt.Sprintf("%v deadlocks (40P01) happened", deadlocks))
	}
	if ok != 2*rounds {
		broken = append(broken, fmt.Sprintf("%d of %d orders succeeded", ok, 2*rounds))
	}
	if sa != stock-2*rounds || sb != stock-4*rounds {
		broken = append(broken, fmt.Sprintf("stock A %d B %d, want %d and %d", sa, sb, stock-2*rounds, stock-4*rounds))
	}
	return append(broken, found.List()...)
}

// TestRaceReversedLinesNeverDeadlock: guarded, the first placement of each
// pair is held with both stock row locks (taken in product id order) until
// the other waits on them; the naive placement takes each line's lock with
// its own UPDATE in the request's order, and the two meet after their first
// UPDATE, each holding the row the other needs next.
func TestRaceReversedLinesNeverDeadlock(t *testing.T) {
	t.Parallel()
	testkit.RaceTest(t, checkReversedLines, betweenReadAndWrite(2), func(t *testing.T) (*testkit.Env, testkit.Meet) {
		e := withNaivePlacement(t, naivePlacement{lockActor: true, lineOrder: true})
		// Detect the deadlocks the naive variant makes in 50ms, not 1s.
		e.Exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = %L', current_database(), '50ms'); END $$`)
		e.Pool.Reset()
		return e, testkit.Meet{Where: testkit.After, Statement: "NaiveTakeStock", N: 2}
	})
}

// ---- credit limit

// checkCreditLimit: a customer with a credit limit of 1000 sends 20
// concurrent orders of 600, each for a different product (so no stock lock
// is shared). Exactly one succeeds; the rest get credit_limit_exceeded.
func checkCreditLimit(t *testing.T, e *testkit.Env, m testkit.Meet) []string {
	found := &testkit.Findings{}
	const n = 20
	customer := e.NewCustomer(1000)
	products := make([]string, n)
	for i := range products {
		products[i] = e.NewProduct(testkit.ProductSpec{PriceCents: 600, Stock: 100})
	}
	codes := make([]domain.Code, n)
	done := m.Arm(t, e)
	testkit.Race(n, func(i int) {
		_, err := as(e, customer).place(fmt.Sprintf("k%d", i), testkit.Line(products[i], 1))
		codes[i] = code(err)
		if err != nil && codes[i] != domain.CodeCreditLimitExceeded {
			found.Add("order %d: %v", i, err)
		}
	})
	done()
	ok := countCode(codes, "")
	owed := e.QueryInt(`SELECT coalesce(sum(total_cents - paid_cents), 0) FROM orders WHERE customer_id = $1 AND status <> 'cancelled'`, customer.ID)
	balance := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID)
	t.Logf("attempts %d, successes %d, outstanding %d (balance %d) of limit 1000", n, ok, owed, balance)
	var broken []string
	if ok != 1 || owed > 1000 {
		broken = append(broken, fmt.Sprintf("%d orders of 600 accepted under a limit of 1000 (outstanding %d)", ok, owed))
	}
	if balance != owed {
		broken = append(broken, fmt.Sprintf("balance %d but the orders owe %d", balance, owed))
	}
	return append(broken, found.List()...)
}

// TestRaceCreditLimit: guarded, the first placement is held with the
// customer's row lock until 7 others wait on it; the naive placement reads
// the customer's balance without locking the row, 8 placements meet after
// that read, and each writes back the balance it computed.
func TestRaceCreditLimit(t *testing.T) {
	t.Parallel()
	testkit.RaceTest(t, checkCreditLimit, betweenReadAndWrite(8), func(t *testing.T) (*testkit.Env, testkit.Meet) {
		return withNaivePlacement(t, naivePlacement{lockStock: true, naiveCharge: true}), betweenReadAndWrite(8)
	})
}

// ---- the naive placement

// naivePlacement is order placement with one of its mechanisms taken out,
// run where production runs it (repos.Placement()). What it keeps of the
// real statements it takes from the real repositories.
type naivePlacement struct {
	repos app.Repositories
	real  app.PlacementStore
	// lockActor and lockStock say which row locks it still takes; the
	// others are plain reads.
	lockActor, lockStock bool
	// lostUpdate writes back the stock it computed from its read instead of
	// decrementing in the database.
	lostUpdate bool
	// lineOrder takes each line's stock with its own UPDATE, in the order of
	// the request's lines instead of one global order.
	lineOrder bool
	// naiveCharge writes back the balance it computed from its read (the
	// balance read with the credit check, plus the total) instead of the
	// guarded ActorChargeBalance, after the order is written.
	naiveCharge bool

	read   []domain.StockRow
	credit domain.Credit
}

func withNaivePlacement(t *testing.T, n naivePlacement) *testkit.Env {
	return testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Placement: n.on}
	}})
}

// on binds a copy of n to one transaction's repositories.
func (n naivePlacement) on(repos app.Repositories) app.PlacementStore {
	n.repos, n.real = repos, repos.Placement()
	return &n
}

func (n *naivePlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	db := testkit.Conn(n.repos)
	var out app.PlacementLocks
	var err error
	if n.lockActor {
		out.Credit, err = n.repos.Actors().LockForOrder(ctx, customer)
	} else {
		err = db.QueryRow(ctx, `SELECT credit_limit_cents, balance_cents, active FROM actors WHERE id = $1`, customer).
			Scan(&out.Credit.Limit, &out.Credit.Balance, &out.Credit.Active)
	}
	if err != nil {
		return out, err
	}
	if n.lockStock {
		out.Rows, err = n.repos.Stock().LockRows(ctx, ids)
	} else {
		var rows pgx.Rows
		if rows, err = db.Query(ctx, `SELECT s.product_id, p.price_cents, s.stock FROM stock_levels s JOIN products p ON p.id = s.product_id WHERE s.product_id = ANY($1) ORDER BY s.product_id`, ids); err == nil {
			out.Rows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.StockRow, error) {
				var s domain.StockRow
				return s, r.Scan(&s.ID, &s.Price, &s.Stock)
			})
		}
	}
	if err != nil {
		return out, err
	}
	n.read, n.credit = out.Rows, out.Credit
	return out, nil
}

func (n *naivePlacement) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	db := testkit.Conn(n.repos)
	switch {
	case n.naiveCharge:
		if err := n.repos.Stock().AddStock(ctx, take); err != nil {
			return nil, err
		}
		placed, err := n.repos.Orders().Insert(ctx, o)
		if err != nil {
			return nil, err
		}
		_, err = db.Exec(ctx, "-- name: NaiveChargeBalance\nUPDATE actors SET balance_cents = $2 WHERE id = $1",
			o.CustomerID(), int64(n.credit.Balance+o.Total()))
		return placed, err
	case n.lostUpdate:
		placed, err := n.real.WritePlacement(ctx, o, nil) // the order and its lines, no stock
		if err != nil {
			return nil, err
		}
		for _, r := range n.read {
			if _, err := db.Exec(ctx, `UPDATE stock_levels SET stock = $2 WHERE product_id = $1`, r.ID, r.Stock+take[r.ID]); err != nil {
				return nil, err
			}
		}
		return placed, nil
	case n.lineOrder:
		for _, l := range o.Lines() {
			if _, err := db.Exec(ctx, "-- name: NaiveTakeStock\nUPDATE stock_levels SET stock = stock - $2 WHERE product_id = $1", l.ProductID, int64(l.Quantity)); err != nil {
				return nil, err
			}
		}
		return n.real.WritePlacement(ctx, o, nil)
	}
	return n.real.WritePlacement(ctx, o, take)
}
