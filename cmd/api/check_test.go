package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestCheckCommandReportsACorruptedBalance: on a database where every
// balance matches its orders, `api check` prints nothing and succeeds; after
// two balances are corrupted behind the service's back, it prints one line
// for each, naming the customer and both figures, and fails (exit 1).
func TestCheckCommandReportsACorruptedBalance(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	getenv := env("DATABASE_URL", e.URL)
	product := e.NewProduct(250, 100)
	var customers []testkit.Actor
	for range 3 {
		c := e.NewActor("customer", 1_000_000)
		res := e.Do("POST", "/v1/orders", c.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 4}}},
			"Idempotency-Key", "k")
		if res.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", res.Status, res.Body)
		}
		customers = append(customers, c)
	}

	out, err := runCmd(t, getenv, "check")
	if err != nil || out != "" {
		t.Fatalf("check on a sound database: %v %q", err, out)
	}

	e.Exec(`UPDATE actors SET balance_cents = 700 WHERE id = $1`, customers[0].ID)
	e.Exec(`UPDATE orders SET paid_cents = 100 WHERE customer_id = $1`, customers[2].ID) // as if a payment skipped the balance
	out, err = runCmd(t, getenv, "check")
	if err == nil || !strings.Contains(err.Error(), "2 finding") {
		t.Errorf("check on a corrupted database returned %v, want an error counting 2 findings", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("check printed %d lines, want 2:\n%s", len(lines), out)
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
	e := testkit.New(t)
	getenv := env("DATABASE_URL", e.URL)
	product := e.NewProduct(250, 100)
	e.NewProduct(300, 5)
	if out, err := runCmd(t, getenv, "check"); err != nil || out != "" {
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
