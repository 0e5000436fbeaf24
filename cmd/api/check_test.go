package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestCheckCommandReportsACorruptedBalance: on a database where every
// balance matches its orders, `api check` prints its one ok line and succeeds; after
// two balances are corrupted behind the service's back (one directly, one
// through an order's paid_cents, which is a paid finding too), it prints a
// balance line for each, naming the customer and both figures, three lines
// in all, leaves the sound customer out, and fails (exit 1).
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

// corruption breaks a sound database in the one way that a kind of
// finding reports: the `-- Corruption:` and `-- Finds:` lines in the comment
// of the kind's statement (db/queries/check.sql says how they are written).
type corruption struct {
	sql   string // run as it is, several statements allowed
	finds string // the finding's line contains it
}

// checkCorruptions reads the corruption of each Check… statement of
// db/queries/*.sql, by the kind it checks (store.CheckKind): the
// "-- Corruption:" line and the comment lines indented under it ("--  "),
// and the "-- Finds:" line.
func checkCorruptions(t *testing.T) map[string]corruption {
	t.Helper()
	out := map[string]corruption{}
	for _, q := range testkit.Queries(t) {
		kind, ok := store.CheckKind(q.Name)
		if !ok {
			continue
		}
		var c corruption
		c.finds, _ = q.Note("Finds")
		inSQL := false
		for _, line := range q.Comment {
			if sql, ok := strings.CutPrefix(line, "-- Corruption:"); ok {
				c.sql, inSQL = strings.TrimSpace(sql), true
			} else if inSQL && strings.HasPrefix(line, "--  ") {
				c.sql += "\n" + strings.TrimSpace(line[2:])
			} else {
				inSQL = false
			}
		}
		out[kind] = c
	}
	return out
}

// TestCheckFindsEachCorruption: for every kind of finding, a sound database
// broken in that one way makes `api check` print exactly one line, of that
// kind, naming what is wrong, and fail (a payment that paid_cents does not
// reflect, or no active staff, once passed with exit 0). Every kind
// Check knows has its corruption, in its statement's comment. The database:
// a staff member; a customer with a credit limit of 2,000 who owes 1,200;
// one product at 250; the customer's order of 4 (1,000, 300 paid) and
// order of 2 (500, nothing paid).
func TestCheckFindsEachCorruption(t *testing.T) {
	t.Parallel()
	corruptions := checkCorruptions(t)
	for _, kind := range store.CheckKinds() {
		c := corruptions[kind]
		if c.sql == "" || c.finds == "" {
			t.Errorf("kind %q has no corruption: its Check… statement needs a -- Corruption: and a -- Finds: line in its comment", kind)
			continue
		}
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
			order := place(4, "a")
			place(2, "b")
			if r := e.Do("POST", "/v1/orders/"+order+"/payments", customer.Token, map[string]any{"amount_cents": 300}, "Idempotency-Key", "p"); r.Status != http.StatusCreated {
				t.Fatalf("pay: %d %s", r.Status, r.Body)
			}
			if out, err := runCmd(t, getenv, "check"); err != nil || !strings.HasPrefix(out, "ok: all ") {
				t.Fatalf("check on a sound database: %v %q", err, out)
			}
			e.Exec(c.sql)
			out, err := runCmd(t, getenv, "check")
			if err == nil || !strings.Contains(err.Error(), "1 finding") {
				t.Errorf("check returned %v, want an error counting 1 finding", err)
			}
			if !strings.HasPrefix(out, kind+": ") || strings.Count(out, "\n") != 1 || !strings.Contains(out, c.finds) {
				t.Errorf("check printed %q, want one %q line containing %q", out, kind, c.finds)
			}
		})
	}
}
