package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestCheckCommandReportsACorruptedBalance: on a database where every
// balance matches its orders, `api check` prints its one ok line and succeeds; after
// two balances are corrupted behind the service's back, it prints one line
// for each, naming the customer and both figures, and fails (exit 1).
func TestCheckCommandReportsACorruptedBalance(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	getenv := env("DATABASE_URL", e.URL)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 100})
	var customers []testkit.Actor
	for range 3 {
		c := e.NewCustomer(1_000_000)
		res := e.Do("POST", "/v1/orders", c.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 4}}},
			"Idempotency-Key", "k")
		if res.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", res.Status, res.Body)
		}
		customers = append(customers, c)
	}

	out, err := runCmd(t, getenv, "check")
	if err != nil || !strings.HasPrefix(out, "ok: all ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("check on a sound database: %v %q, want one ok line", err, out)
	}

	e.Exec(`UPDATE actors SET balance_cents = 700 WHERE id = $1`, customers[0].ID)
	e.Exec(`UPDATE orders SET paid_cents = 100 WHERE customer_id = $1`, customers[2].ID) // as if a payment skipped the balance
	out, err = runCmd(t, getenv, "check")
	// Three: the two balances, and the order whose paid_cents no payment explains.
	if err == nil || !strings.Contains(err.Error(), "3 finding") {
		t.Errorf("check on a corrupted database returned %v, want an error counting 3 findings", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("check printed %d lines, want 3:\n%s", len(lines), out)
	}
	want := []struct{ id, stored, owed string }{
		{customers[0].ID, "balance_cents 700", "owe 1000"},
		{customers[2].ID, "balance_cents 1000", "owe 900"},
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "balance: ") && strings.Contains(l, w.id) && strings.Contains(l, w.stored) && strings.Contains(l, w.owed) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line names customer %s with %s and %s:\n%s", w.id, w.stored, w.owed, out)
		}
	}
	if strings.Contains(out, customers[1].ID) {
		t.Errorf("check reported the sound customer %s:\n%s", customers[1].ID, out)
	}
}

// TestCheckCommandReportsAProductWithoutStockLevel: a product whose stock
// level was lost behind the service's back is one finding.
func TestCheckCommandReportsAProductWithoutStockLevel(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	getenv := env("DATABASE_URL", e.URL)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 100})
	e.NewProduct(testkit.ProductSpec{PriceCents: 300, Stock: 5})
	if out, err := runCmd(t, getenv, "check"); err != nil || !strings.HasPrefix(out, "ok: all ") {
		t.Fatalf("check on a sound database: %v %q", err, out)
	}
	e.Exec(`DELETE FROM stock_levels WHERE product_id = $1`, product)
	out, err := runCmd(t, getenv, "check")
	if err == nil || !strings.Contains(err.Error(), "1 finding") {
		t.Errorf("check returned %v, want an error counting 1 finding", err)
	}
	if !strings.HasPrefix(out, "stock: product "+product) || strings.Count(out, "\n") != 1 {
		t.Errorf("check printed %q, want one stock line naming %s", out, product)
	}
}

// TestCheckCommandReportsCorruptedRefunds: on a database whose refunds all
// hold, `api check` prints its ok line; after one order is refunded beyond what
// it was paid and another's refunded_cents drifts from its refund rows,
// behind the service's back, it prints one refund_beyond_paid and one
// refund_sum line, each naming its order and figures, and fails.
func TestCheckCommandReportsCorruptedRefunds(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	getenv := env("DATABASE_URL", e.URL)
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 1000, Stock: 100})
	var orders []string
	for i := range 3 {
		key := func(s string) []string { return []string{"Idempotency-Key", s + strconv.Itoa(i)} }
		o := e.Do("POST", "/v1/orders", customer.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}}, key("o")...)
		id := o.String("id")
		steps := []*httpkit.Response{
			e.Do("POST", "/v1/orders/"+id+"/payments", customer.Token, map[string]any{"amount_cents": 600}, key("p")...),
			e.Do("POST", "/v1/orders/"+id+"/cancel", customer.Token, nil, "If-Match", `"v2"`),
			e.Do("POST", "/v1/orders/"+id+"/refunds", e.Staff.Token, map[string]any{"amount_cents": 400, "reason": "cancelled"}, key("r")...),
		}
		for _, r := range append(steps, o) {
			if r.Status >= 300 {
				t.Fatalf("setup order %d: %d %s", i, r.Status, r.Body)
			}
		}
		orders = append(orders, id)
	}
	if out, err := runCmd(t, getenv, "check"); err != nil || !strings.HasPrefix(out, "ok: all ") {
		t.Fatalf("check on a sound database: %v %q", err, out)
	}

	// As if a refund had skipped the guard and the CHECK: 700 of 600 paid,
	// with a refund row to match, so only refund_beyond_paid fires.
	e.Exec(`ALTER TABLE orders DROP CONSTRAINT orders_refund_within_paid`)
	e.Exec(`UPDATE orders SET refunded_cents = 700 WHERE id = $1`, orders[0])
	e.Exec(`INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason) VALUES (gen_random_uuid(), $1, $2, 300, 'x')`, orders[0], e.Staff.ID)
	// As if a refund row had been lost: refunded_cents 400, refunds 0.
	e.Exec(`DELETE FROM refunds WHERE order_id = $1`, orders[2])
	out, err := runCmd(t, getenv, "check")
	if err == nil || !strings.Contains(err.Error(), "2 finding") {
		t.Errorf("check on corrupted refunds returned %v, want an error counting 2 findings", err)
	}
	want := []string{
		"refund_beyond_paid: order " + orders[0] + " (cancelled) has refunded_cents 700 but paid_cents 600",
		"refund_sum: order " + orders[2] + " has refunded_cents 400 but its refunds sum to 0 (difference +400)",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("check printed no line %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, orders[1]) {
		t.Errorf("check reported the sound order %s:\n%s", orders[1], out)
	}
}

// checkCorruptions breaks a sound database in one way per kind of finding.
// Each gets the ids of a sound database: a customer who owes 700 of a
// 1,000 order (300 paid), its product, and a second order of theirs.
var checkCorruptions = map[string]struct {
	sql  []string
	what string // the finding's line contains it
}{
	"balance":        {[]string{`UPDATE actors SET balance_cents = balance_cents + 1 WHERE id = @customer`}, "balance_cents 1201"},
	"credit_limit":   {[]string{`UPDATE actors SET credit_limit_cents = 1000 WHERE id = @customer`}, "owes 1200, over their credit limit of 1000"},
	"paid":           {[]string{`INSERT INTO payments (id, order_id, actor_id, amount_cents) VALUES (gen_random_uuid(), @order, @customer, 50)`}, "paid_cents 300 but its payments sum to 350"},
	"total":          {[]string{`UPDATE order_lines SET quantity = quantity + 1 WHERE order_id = @order`}, "total_cents 1000 but its lines sum to 1250"},
	"staff":          {[]string{`UPDATE actors SET active = false WHERE role = 'staff'`}, "no active staff actor"},
	"stock":          {[]string{`DELETE FROM stock_levels WHERE product_id = @product`}, "has no stock level"},
	"negative_stock": {[]string{`ALTER TABLE stock_levels DROP CONSTRAINT stock_levels_stock_nonnegative`, `UPDATE stock_levels SET stock = -2 WHERE product_id = @product`}, "has stock -2, below zero"},
	// Refunds are staff's on a cancelled order; the corruptions go around
	// the guard (TestCheckCommandReportsCorruptedRefunds has more).
	"refund_beyond_paid": {[]string{`UPDATE orders SET refunded_cents = 100 WHERE id = @order`,
		`INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason) VALUES (gen_random_uuid(), @order, @staff, 100, 'x')`},
		"(placed) has refunded_cents 100 but paid_cents 300"},
	"refund_sum": {[]string{`INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason) VALUES (gen_random_uuid(), @order, @staff, 50, 'x')`},
		"has refunded_cents 0 but its refunds sum to 50"},
	"order_event": {[]string{
		`DELETE FROM outbox_events WHERE type = 'order.placed' AND aggregate_id IN (@order, @older)`,
		// An order older than OUTBOX_RETENTION may have lost its delivered event: no finding.
		`UPDATE orders SET created_at = now() - interval '169 hours' WHERE id = @older`,
	}, "has no order.placed event"},
}

// TestCheckFindsEachCorruption: for every kind of finding, a sound database
// broken in that one way makes `api check` print exactly one line, of that
// kind, naming what is wrong, and fail; before, a payment that paid_cents
// does not reflect, or no active staff, passed with exit 0. Every kind
// Check knows has its corruption here.
func TestCheckFindsEachCorruption(t *testing.T) {
	t.Parallel()
	for _, kind := range store.CheckKinds() {
		if _, ok := checkCorruptions[kind]; !ok {
			t.Errorf("kind %q has no corruption test in checkCorruptions", kind)
		}
	}
	for kind, c := range checkCorruptions {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := httpkit.New(t)
			getenv := env("DATABASE_URL", e.URL)
			product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 100})
			customer := e.NewCustomer(2_000)
			place := func(qty int, key string) string {
				r := e.Do("POST", "/v1/orders", customer.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": qty}}},
					"Idempotency-Key", key)
				if r.Status != http.StatusCreated {
					t.Fatalf("place: %d %s", r.Status, r.Body)
				}
				return r.String("id")
			}
			order, older := place(4, "a"), place(2, "b")
			if r := e.Do("POST", "/v1/orders/"+order+"/payments", customer.Token, map[string]any{"amount_cents": 300}, "Idempotency-Key", "p"); r.Status != http.StatusCreated {
				t.Fatalf("pay: %d %s", r.Status, r.Body)
			}
			if out, err := runCmd(t, getenv, "check"); err != nil || !strings.HasPrefix(out, "ok: all ") {
				t.Fatalf("check on a sound database: %v %q", err, out)
			}
			for _, stmt := range c.sql {
				stmt = strings.NewReplacer("@customer", "'"+customer.ID+"'", "@product", "'"+product+"'", "@staff", "'"+e.Staff.ID+"'",
					"@order", "'"+order+"'", "@older", "'"+older+"'").Replace(stmt)
				e.Exec(stmt)
			}
			out, err := runCmd(t, getenv, "check")
			if err == nil || !strings.Contains(err.Error(), "1 finding") {
				t.Errorf("check returned %v, want an error counting 1 finding", err)
			}
			if !strings.HasPrefix(out, kind+": ") || strings.Count(out, "\n") != 1 || !strings.Contains(out, c.what) {
				t.Errorf("check printed %q, want one %q line containing %q", out, kind, c.what)
			}
		})
	}
}
