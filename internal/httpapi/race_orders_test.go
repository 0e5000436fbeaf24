package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// meet is where a race test's racers meet: a stop before or after a named
// statement, released once n racers are there, held at the stop or waiting
// for a lock behind the one held (testkit.Env.Interleave). Guarded and naive
// runs both go through it, so the interleaving is forced in both.
type meet struct {
	where     testkit.Where
	statement string
	n         int
}

// arm arms the meeting on e; call done after the race.
func (m meet) arm(t *testing.T, e *testkit.Env) (done func()) {
	il := e.Interleave(m.where, m.statement, m.n)
	return func() {
		t.Helper()
		held, waiting := il.Wait(t)
		t.Logf("interleaving forced %s %s: %d racers held there, %d waiting for a lock", m.where, m.statement, held, waiting)
	}
}

// raceTest runs an invariant check twice: against the real service, where it
// must hold, and against a deliberately naive variant of the mechanism, where
// it must break. The second run is the proof that the test can fail (the
// seed's "race reproduced, then shown fixed"). Each run forces its
// interleaving at its meeting point.
func raceTest(t *testing.T, check func(t *testing.T, e *testkit.Env, m meet) []string, guarded meet, naive func(t *testing.T) (*testkit.Env, meet)) {
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t)
		e.CheckAtEnd()
		for _, b := range check(t, e, guarded) {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		e, m := naive(t)
		broken := check(t, e, m)
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: this test cannot catch the race")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
	})
}

// findings collects unexpected outcomes from many goroutines. In the naive
// run they are part of the breakage; in the guarded run they fail the test.
type findings struct {
	mu   sync.Mutex
	list []string
}

func (f *findings) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
}

func placeOrder(e *testkit.Env, token, key string, lines ...any) *testkit.Response {
	var ls []map[string]any
	for i := 0; i+1 < len(lines); i += 2 {
		ls = append(ls, map[string]any{"product_id": lines[i], "quantity": lines[i+1]})
	}
	return e.Do("POST", "/v1/orders", token, map[string]any{"lines": ls}, "Idempotency-Key", key)
}

// ---- no overselling

// checkNoOversell: stock 10, 100 concurrent single-unit orders from 100
// customers (so that only the product row is shared). Exactly 10 succeed,
// the other 90 get insufficient_stock, and stock ends at 0.
func checkNoOversell(t *testing.T, e *testkit.Env, m meet) []string {
	found := &findings{}
	const n, stock = 100, 10
	product := e.NewProduct(100, stock)
	customers := make([]testkit.Actor, n)
	for i := range customers {
		customers[i] = e.NewActor("customer", 1_000_000)
	}
	statuses := make([]int, n)
	done := m.arm(t, e)
	testkit.Race(n, func(i int) {
		res := placeOrder(e, customers[i].Token, "k", product, 1)
		statuses[i] = res.Status
		if res.Status != http.StatusCreated && res.Code() != "insufficient_stock" {
			found.add("order %d: %d %s", i, res.Status, res.Body)
		}
	})
	done()
	var broken []string
	ok := count(statuses, http.StatusCreated)
	left := stockOf(e, product)
	sold := e.QueryInt(`SELECT coalesce(sum(quantity), 0) FROM order_lines WHERE product_id = $1`, product)
	t.Logf("attempts %d, successes %d, final stock %d, units on orders %d", n, ok, left, sold)
	if ok != stock {
		broken = append(broken, fmt.Sprintf("%d orders succeeded for %d units of stock", ok, stock))
	}
	if left != 0 || sold != stock {
		broken = append(broken, fmt.Sprintf("stock %d and %d units sold, want 0 and %d", left, sold, stock))
	}
	return append(broken, found.list...)
}

// betweenReadAndWrite is a placement's meeting point: its reads (and, when
// guarded, its locks) are done, its writes not yet sent.
func betweenReadAndWrite(n int) meet { return meet{testkit.Before, "OrderInsert", n} }

// TestRaceNoOversell: guarded, the first placement is held with its product
// lock until 11 others wait on that lock; the naive placement reads the stock
// without a lock, and 12 placements meet after their reads.
func TestRaceNoOversell(t *testing.T) {
	t.Parallel()
	raceTest(t, checkNoOversell, betweenReadAndWrite(12), func(t *testing.T) (*testkit.Env, meet) {
		e := withNaivePlacement(t, naivePlacement{lockProducts: false, lostUpdate: true})
		// The CHECK constraint is the last line of defence; without it the
		// naive variant shows what the locks alone prevent.
		e.Exec(`ALTER TABLE stock_levels DROP CONSTRAINT stock_levels_stock_nonnegative`)
		return e, betweenReadAndWrite(12)
	})
}

// naivePlacement is order placement with one of its mechanisms taken out,
// run where production runs it (app.PlacementStore). What it keeps of the
// real statements it takes from the real repositories.
type naivePlacement struct {
	tx   app.Repositories
	real app.PlacementStore
	// lockActor and lockProducts say which row locks it still takes; the
	// others are plain reads.
	lockActor, lockProducts bool
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

	read   []app.StockRow
	credit app.CreditState
}

func withNaivePlacement(t *testing.T, n naivePlacement, opts ...testkit.Options) *testkit.Env {
	var o testkit.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Wrap = func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Placement: func(tx app.Repositories) app.PlacementStore {
			p := n
			p.tx, p.real = tx, tx.(app.PlacementStore)
			return &p
		}}
	}
	return testkit.New(t, o)
}

func (n *naivePlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	db := testkit.Conn(n.tx)
	var out app.PlacementLocks
	var err error
	if n.lockActor {
		out.Credit, err = n.tx.Actors().LockForOrder(ctx, customer)
	} else {
		err = db.QueryRow(ctx, `SELECT credit_limit_cents, balance_cents, active FROM actors WHERE id = $1`, customer).
			Scan(&out.Credit.Limit, &out.Credit.Balance, &out.Credit.Active)
	}
	if err != nil {
		return out, err
	}
	if n.lockProducts {
		out.Rows, err = n.tx.Stock().LockRows(ctx, ids)
	} else {
		var rows pgx.Rows
		if rows, err = db.Query(ctx, `SELECT s.product_id, p.price_cents, s.stock FROM stock_levels s JOIN products p ON p.id = s.product_id WHERE s.product_id = ANY($1) ORDER BY s.product_id`, ids); err == nil {
			out.Rows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (app.StockRow, error) {
				var s app.StockRow
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
	db := testkit.Conn(n.tx)
	switch {
	case n.naiveCharge:
		if err := n.tx.Stock().AddStock(ctx, take); err != nil {
			return nil, err
		}
		placed, err := n.tx.Orders().Insert(ctx, o)
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

// ---- reversed lines never deadlock

// checkReversedLines: rounds of two concurrent two-line orders, one A then B,
// the other B then A. Every one succeeds, no deadlock happens (not even one
// the runner would retry), and the stock adds up.
func checkReversedLines(t *testing.T, e *testkit.Env, m meet) []string {
	found := &findings{}
	const rounds, stock = 10, 10_000
	a, b := e.NewProduct(10, stock), e.NewProduct(10, stock)
	ok := 0
	for round := range rounds {
		customers := [2]testkit.Actor{e.NewActor("customer", 1_000_000), e.NewActor("customer", 1_000_000)}
		statuses := make([]int, 2)
		done := m.arm(t, e)
		testkit.Race(2, func(i int) {
			var res *testkit.Response
			if i == 0 {
				res = placeOrder(e, customers[i].Token, "k", a, 1, b, 2)
			} else {
				res = placeOrder(e, customers[i].Token, "k", b, 2, a, 1)
			}
			statuses[i] = res.Status
			if res.Status != http.StatusCreated {
				found.add("round %d order %d: %d %s", round, i, res.Status, res.Body)
			}
		})
		done()
		ok += count(statuses, http.StatusCreated)
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
	return append(broken, found.list...)
}

// TestRaceReversedLinesNeverDeadlock: guarded, the first placement of each
// pair is held with both product locks (taken in id order) until the other
// waits on them; the naive placement takes each line's lock with its own
// UPDATE in the request's order, and the two meet after their first UPDATE,
// each holding the row the other needs next.
func TestRaceReversedLinesNeverDeadlock(t *testing.T) {
	t.Parallel()
	raceTest(t, checkReversedLines, betweenReadAndWrite(2), func(t *testing.T) (*testkit.Env, meet) {
		e := withNaivePlacement(t, naivePlacement{lockActor: true, lineOrder: true})
		// Detect the deadlocks the naive variant makes in 50ms, not 1s.
		e.Exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = %L', current_database(), '50ms'); END $$`)
		e.Pool.Reset()
		return e, meet{testkit.After, "NaiveTakeStock", 2}
	})
}

// ---- credit limit

// checkCreditLimit: a customer with a credit limit of 1000 sends 20
// concurrent orders of 600, each for a different product (so no product lock
// is shared). Exactly one succeeds; the rest get credit_limit_exceeded.
func checkCreditLimit(t *testing.T, e *testkit.Env, m meet) []string {
	found := &findings{}
	const n = 20
	customer := e.NewActor("customer", 1000)
	products := make([]string, n)
	for i := range products {
		products[i] = e.NewProduct(600, 100)
	}
	statuses := make([]int, n)
	done := m.arm(t, e)
	testkit.Race(n, func(i int) {
		res := placeOrder(e, customer.Token, fmt.Sprintf("k%d", i), products[i], 1)
		statuses[i] = res.Status
		if res.Status != http.StatusCreated && res.Code() != "credit_limit_exceeded" {
			found.add("order %d: %d %s", i, res.Status, res.Body)
		}
	})
	done()
	ok := count(statuses, http.StatusCreated)
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
	return append(broken, found.list...)
}

// TestRaceCreditLimit: guarded, the first placement is held with the
// customer's row lock until 7 others wait on it; the naive placement reads
// the customer's balance without locking the row, 8 placements meet after
// that read, and each writes back the balance it computed.
func TestRaceCreditLimit(t *testing.T) {
	t.Parallel()
	raceTest(t, checkCreditLimit, betweenReadAndWrite(8), func(t *testing.T) (*testkit.Env, meet) {
		return withNaivePlacement(t, naivePlacement{lockProducts: true, naiveCharge: true}), betweenReadAndWrite(8)
	})
}

// ---- payments

// checkPayments: an order of 1000 gets 30 concurrent payments of 100 with
// distinct keys, plus 10 concurrent retries of one more key. paid_cents ends
// at exactly 1000, it equals the sum of the payment rows, 10 payments
// succeed and the rest get overpayment, and the retried key counts once.
func checkPayments(t *testing.T, e *testkit.Env, m meet) []string {
	found := &findings{}
	customer := e.NewActor("customer", 1_000_000)
	product := e.NewProduct(100, 100)
	res := placeOrder(e, customer.Token, "order", product, 10)
	if res.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", res.Status, res.Body)
	}
	order := res.String("id")
	const distinct, retried = 30, 10
	statuses := make([]int, distinct+retried)
	done := m.arm(t, e)
	testkit.Race(distinct+retried, func(i int) {
		key := fmt.Sprintf("pay-%d", i)
		if i >= distinct {
			key = "pay-retried"
		}
		r := e.Do("POST", "/v1/orders/"+order+"/payments", customer.Token, map[string]any{"amount_cents": 100}, "Idempotency-Key", key)
		statuses[i] = r.Status
		if r.Status != http.StatusCreated && r.Code() != "overpayment" {
			found.add("payment %d: %d %s", i, r.Status, r.Body)
		}
	})
	done()
	paid := e.QueryInt(`SELECT paid_cents FROM orders WHERE id = $1`, order)
	rows := e.QueryInt(`SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE order_id = $1`, order)
	payments := e.QueryInt(`SELECT count(*) FROM payments WHERE order_id = $1`, order)
	t.Logf("attempts %d, 201s %d, payments %d, paid_cents %d, sum of payments %d", len(statuses), count(statuses, http.StatusCreated), payments, paid, rows)
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
	return append(broken, found.list...)
}

// TestRacePayments: both runs meet before the payment row is inserted.
// Guarded, the first payment is there with the order's row lock taken by its
// guarded increment, and 11 others wait on it; the naive payment has only
// read paid_cents, and 12 meet before any writes.
func TestRacePayments(t *testing.T) {
	t.Parallel()
	at := meet{testkit.Before, "PaymentInsert", 12}
	raceTest(t, checkPayments, at, func(t *testing.T) (*testkit.Env, meet) {
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Orders: func(tx app.Repositories) app.OrderRepo {
				return naivePayment{OrderRepo: tx.Orders(), db: testkit.Conn(tx)}
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

// ---- cancel against ship

// checkCancelVsShip: for several orders, 4 cancels (by the owner) and 4 ships
// (by staff) race with the same ETag. Exactly one request wins per order; if
// the cancel won the stock is back, if the ship won it stays taken.
func checkCancelVsShip(t *testing.T, e *testkit.Env, m meet) []string {
	found := &findings{}
	const rounds, each, stock, qty = 5, 4, 50, 3
	var broken []string
	for round := 0; round < rounds; round++ {
		customer := e.NewActor("customer", 1_000_000)
		product := e.NewProduct(10, stock)
		res := placeOrder(e, customer.Token, "order", product, qty)
		if res.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", res.Status, res.Body)
		}
		order, tag := res.String("id"), res.Header.Get("ETag")
		var cancels, ships atomic.Int64
		done := m.arm(t, e)
		testkit.Race(2*each, func(i int) {
			var r *testkit.Response
			if i%2 == 0 {
				r = e.Do("POST", "/v1/orders/"+order+"/cancel", customer.Token, nil, "If-Match", tag)
			} else {
				r = e.Do("POST", "/v1/orders/"+order+"/ship", e.Staff.Token, nil, "If-Match", tag)
			}
			switch {
			case r.Status == http.StatusOK && i%2 == 0:
				cancels.Add(1)
			case r.Status == http.StatusOK:
				ships.Add(1)
			case r.Code() != "version_conflict" && r.Code() != "invalid_transition":
				found.add("request %d: %d %s", i, r.Status, r.Body)
			}
		})
		done()
		status := orderStatus(t, e, order)
		left := stockOf(e, product)
		t.Logf("round %d: %d cancels and %d ships won, status %s, stock %d", round, cancels.Load(), ships.Load(), status, left)
		switch {
		case cancels.Load()+ships.Load() != 1:
			broken = append(broken, fmt.Sprintf("round %d: %d cancels and %d ships succeeded with one ETag", round, cancels.Load(), ships.Load()))
		case status == "cancelled" && left != stock, status == "shipped" && left != stock-qty:
			broken = append(broken, fmt.Sprintf("round %d: order %s but stock %d", round, status, left))
		}
	}
	return append(broken, found.list...)
}

func orderStatus(t *testing.T, e *testkit.Env, id string) string {
	t.Helper()
	var status string
	if err := e.Pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE id = $1`, id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	return status
}

// TestRaceCancelVsShip: guarded, the first transition is held after its
// version-guarded UPDATE, with the order's row lock, until the 7 others wait
// on it; the naive transition writes without the version guard, and all 8
// meet before writing.
func TestRaceCancelVsShip(t *testing.T) {
	t.Parallel()
	raceTest(t, checkCancelVsShip, meet{testkit.After, "OrderSetStatus", 8}, func(t *testing.T) (*testkit.Env, meet) {
		return withNaiveTransition(t), meet{testkit.Before, "NaiveSetStatus", 8}
	})
}

func withNaiveTransition(t *testing.T) *testkit.Env {
	return testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Orders: func(tx app.Repositories) app.OrderRepo {
			return naiveTransition{OrderRepo: tx.Orders(), db: testkit.Conn(tx)}
		}}
	}})
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

// ---- at least one active staff

// checkLastStaff: in each round two staff members, the only active ones,
// deactivate each other at the same moment. Exactly one succeeds and one
// staff member stays active. In both runs the two deactivations meet after
// counting the other active staff, so the write skew is attempted on every
// round.
func checkLastStaff(t *testing.T, e *testkit.Env) []string {
	found := &findings{}
	const rounds = 15
	var broken []string
	for round := 0; round < rounds; round++ {
		a, b := e.NewActor("staff", 0), e.NewActor("staff", 0)
		e.Exec(`UPDATE actors SET active = false WHERE role = 'staff' AND id NOT IN ($1, $2)`, a.ID, b.ID)
		statuses := make([]int, 2)
		il := e.Interleave(testkit.After, "ActorCountOtherActiveStaff", 2)
		testkit.Race(2, func(i int) {
			by, target := a, b
			if i == 1 {
				by, target = b, a
			}
			r := e.Do("POST", "/v1/actors/"+target.ID+"/deactivate", by.Token, nil)
			statuses[i] = r.Status
			// 401: the other request won first and this caller's token
			// stopped working at once, which is also correct.
			if r.Status != http.StatusOK && r.Code() != "last_staff" && r.Status != http.StatusUnauthorized {
				found.add("round %d request %d: %d %s", round, i, r.Status, r.Body)
			}
		})
		if held, _ := il.Wait(t); held != 2 {
			t.Errorf("round %d: %d deactivations met after counting the staff, want 2", round, held)
		}
		active := e.QueryInt(`SELECT count(*) FROM actors WHERE role = 'staff' AND active`)
		if active != 1 {
			broken = append(broken, fmt.Sprintf("round %d: %d active staff after two mutual deactivations (statuses %v)", round, active, statuses))
		}
	}
	t.Logf("rounds %d, broken rounds %d, serialization retries %v", rounds, len(broken), e.Metric("ordersvc_tx_retries_total", "sqlstate", "40001"))
	return append(broken, found.list...)
}

func TestRaceLastStaffRemains(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range checkLastStaff(t, testkit.New(t)) {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Isolation: func(app.Isolation) app.Isolation { return app.ReadCommitted }}
		}})
		broken := checkLastStaff(t, e)
		if len(broken) == 0 {
			t.Fatal("the naive variant (READ COMMITTED) kept the invariant: this test cannot catch the write skew")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
	})
}
