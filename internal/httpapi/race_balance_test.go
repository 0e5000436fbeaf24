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

// ---- the maintained balance never loses an update

// checkBalanceUpdates: a customer owes 5,000 on five orders of 1,000. At one
// moment, five payments of 300 (one per order) and five new orders of 700
// race. Every request succeeds, and the maintained balance ends at exactly
// what the orders owe: 5,000 - 5 × 300 + 5 × 700 = 7,000. In both runs the
// payments are held just before they write the balance until all five are
// there (stop), so their moves are concurrent with each other and with the
// placements on every run. With every read before every write, a naive run
// loses four payments (+1,200) and any number of placements (-700 each);
// 300 and 700 are chosen so that those can never cancel out.
func checkBalanceUpdates(t *testing.T, e *testkit.Env, stop string) []string {
	found := &findings{}
	const n, owedBefore, pay, orderTotal = 5, 1000, 300, 700
	customer := e.NewActor("customer", 1_000_000)
	first := e.NewProduct(owedBefore, 1000)
	later := e.NewProduct(orderTotal, 1000)
	orders := make([]string, n)
	for i := range orders {
		res := placeOrder(e, customer.Token, fmt.Sprintf("before-%d", i), first, 1)
		if res.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", res.Status, res.Body)
		}
		orders[i] = res.String("id")
	}
	payments := e.Hooks.Stop(testkit.Before, stop)
	raced, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		defer payments.Release()
		deadline := time.After(30 * time.Second)
		for payments.Held() < n {
			select {
			case <-raced:
			case <-deadline:
			case <-time.After(2 * time.Millisecond):
				continue
			}
			found.add("only %d of %d payments were held together at %s", payments.Held(), n, stop)
			return
		}
	}()
	statuses := make([]int, 2*n)
	testkit.Race(2*n, func(i int) {
		var r *testkit.Response
		if i%2 == 0 {
			r = e.Do("POST", "/v1/orders/"+orders[i/2]+"/payments", customer.Token, map[string]any{"amount_cents": pay},
				"Idempotency-Key", fmt.Sprintf("pay-%d", i))
		} else {
			r = placeOrder(e, customer.Token, fmt.Sprintf("during-%d", i), later, 1)
		}
		statuses[i] = r.Status
		if r.Status != http.StatusCreated {
			found.add("request %d: %d %s", i, r.Status, r.Body)
		}
	})
	close(raced)
	<-watched
	want := int64(n*owedBefore - n*pay + n*orderTotal)
	owed := e.QueryInt(`SELECT coalesce(sum(total_cents - paid_cents), 0) FROM orders WHERE customer_id = $1 AND status IN ('placed', 'shipped')`, customer.ID)
	balance := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID)
	t.Logf("requests %d, 201s %d, payments held together at %s, balance %d, orders owe %d, want %d",
		len(statuses), count(statuses, http.StatusCreated), stop, balance, owed, want)
	var broken []string
	if balance != owed || owed != want {
		broken = append(broken, fmt.Sprintf("balance %d, orders owe %d, want both %d", balance, owed, want))
	}
	return append(broken, found.list...)
}

// TestRaceBalanceNeverLosesAnUpdate: guarded, the payments meet before
// their guarded ActorReleaseBalance; the naive variant moves the balance by
// read-modify-write in Go (payments and placements alike), and its payments
// meet after their read, before their write.
func TestRaceBalanceNeverLosesAnUpdate(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t)
		e.CheckAtEnd()
		for _, b := range checkBalanceUpdates(t, e, "ActorReleaseBalance") {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner,
				Placement: func(tx app.Repositories) app.PlacementStore {
					return &naivePlacement{tx: tx, real: tx.(app.PlacementStore), lockActor: true, lockProducts: true, naiveCharge: true}
				},
				Actors: func(tx app.Repositories) app.ActorRepo {
					return naiveBalance{ActorRepo: tx.Actors(), db: testkit.Conn(tx)}
				},
			}
		}})
		broken := checkBalanceUpdates(t, e, "NaiveWriteBalance")
		if len(broken) == 0 {
			t.Fatal("the naive variant (read-modify-write in Go) kept the balance: this test cannot catch the lost update")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
	})
}

// naiveBalance releases the balance by read-modify-write in Go instead of
// one guarded statement: it reads the balance without a lock, computes the
// new value and writes it back, overwriting whatever moved in between.
type naiveBalance struct {
	app.ActorRepo
	db dbsqlc.DBTX
}

func (n naiveBalance) ReleaseBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) error {
	var balance int64
	if err := n.db.QueryRow(ctx, `SELECT balance_cents FROM actors WHERE id = $1`, customer).Scan(&balance); err != nil {
		return err
	}
	_, err := n.db.Exec(ctx, "-- name: NaiveWriteBalance\nUPDATE actors SET balance_cents = $2 WHERE id = $1", customer, balance-int64(amount))
	return err
}

// ---- every order change moves the balance, and only those that happen

// TestBalanceFollowsEveryOrderChange drives every write that changes an
// order's total, paid amount or status, and the rejections that change
// nothing, and after each step compares the maintained balance with what is
// expected and with the sum over the orders (api check). A credit limit
// lowered below the balance blocks new orders and nothing else.
func TestBalanceFollowsEveryOrderChange(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	customer := e.NewActor("customer", 10_000)
	product := e.NewProduct(1000, 100)
	step := func(what string, res *testkit.Response, status int, code string, balance int64) *testkit.Response {
		t.Helper()
		if res.Status != status || (code != "" && res.Code() != code) {
			t.Fatalf("%s: %d %s, want %d %s", what, res.Status, res.Body, status, code)
		}
		if got := e.QueryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customer.ID); got != balance {
			t.Errorf("%s: balance %d, want %d", what, got, balance)
		}
		e.Check()
		return res
	}
	pay := func(order, key string, amount int64) *testkit.Response {
		return e.Do("POST", "/v1/orders/"+order+"/payments", customer.Token, map[string]any{"amount_cents": amount}, "Idempotency-Key", key)
	}
	move := func(order, action, token, etag string) *testkit.Response {
		return e.Do("POST", "/v1/orders/"+order+"/"+action, token, nil, "If-Match", etag)
	}

	o1 := step("place 3000", placeOrder(e, customer.Token, "o1", product, 3), 201, "", 3000)
	o2 := step("place 2000", placeOrder(e, customer.Token, "o2", product, 2), 201, "", 5000)
	step("place 6000 over the limit", placeOrder(e, customer.Token, "o-over", product, 6), 422, "credit_limit_exceeded", 5000)
	step("placement replayed", placeOrder(e, customer.Token, "o2", product, 2), 201, "", 5000)
	step("pay 1000", pay(o1.String("id"), "p1", 1000), 201, "", 4000)
	step("pay 1000 replayed", pay(o1.String("id"), "p1", 1000), 201, "", 4000)
	step("overpay", pay(o1.String("id"), "p-over", 2001), 409, "overpayment", 4000)
	shipped := step("ship", move(o1.String("id"), "ship", e.Staff.Token, `"v2"`), 200, "", 4000)
	step("pay the shipped order in full", pay(o1.String("id"), "p2", 2000), 201, "", 2000)
	cancelled := step("cancel unpaid", move(o2.String("id"), "cancel", customer.Token, o2.Header.Get("ETag")), 200, "", 0)
	step("cancel again", move(o2.String("id"), "cancel", customer.Token, cancelled.Header.Get("ETag")), 409, "invalid_transition", 0)
	step("pay a cancelled order", pay(o2.String("id"), "p3", 100), 409, "invalid_transition", 0)
	step("ship a cancelled order", move(o2.String("id"), "ship", e.Staff.Token, cancelled.Header.Get("ETag")), 409, "invalid_transition", 0)
	step("cancel a shipped order", move(o1.String("id"), "cancel", customer.Token, shipped.Header.Get("ETag")), 409, "", 0)

	o3 := step("place 4000", placeOrder(e, customer.Token, "o3", product, 4), 201, "", 4000)
	e.Exec(`UPDATE actors SET credit_limit_cents = 1000 WHERE id = $1`, customer.ID)
	step("place under a limit lowered below the balance", placeOrder(e, customer.Token, "o4", product, 1), 422, "credit_limit_exceeded", 4000)
	step("pay under the lowered limit", pay(o3.String("id"), "p4", 500), 201, "", 3500)
	step("cancel an order paid in part", move(o3.String("id"), "cancel", customer.Token, `"v2"`), 409, "invalid_transition", 3500)
	step("ship under the lowered limit", move(o3.String("id"), "ship", e.Staff.Token, `"v2"`), 200, "", 3500)
	step("pay the rest", pay(o3.String("id"), "p5", 3500), 201, "", 0)
	step("place within the lowered limit", placeOrder(e, customer.Token, "o5", product, 1), 201, "", 1000)
}
