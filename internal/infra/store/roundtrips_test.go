package store_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// The pipe and the pipelined repositories exist to save round trips
// (docs/fast-path.md). This test pins down what each round trip of a
// placement, its replay and an order read carries, so that a change which
// costs a round trip, or moves a statement from one to another, fails here
// instead of in a benchmark.
func TestRoundTripsOfAPlacement(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 500, Stock: 100})
	order := map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 2}}}
	// A first request puts the token in the cache: the later ones check it
	// in band, in front of their first statement (ADR 0005).
	if res := e.Do("POST", "/v1/orders", customer.Token, order, "Idempotency-Key", "warm-up"); res.Status != http.StatusCreated {
		t.Fatalf("warm-up: %d %s", res.Status, res.Body)
	}

	stop := e.Hooks.Record()
	res := e.Do("POST", "/v1/orders", customer.Token, order, "Idempotency-Key", "k1")
	placement := stop()
	if res.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", res.Status, res.Body)
	}
	want := []string{
		"begin GuardsSet IdempotencySetLockTimeout IdempotencyClaim IdempotencySetLockTimeout ActorByTokenHash IdempotencyGet ActorLockForOrder StockLockRows",
		"ActorChargeBalance StockAddDeltas OrderInsert OrderLinesInsert OutboxInsert IdempotencyComplete commit",
	}
	check(t, "placement", placement, want)

	stop = e.Hooks.Record()
	res = e.Do("POST", "/v1/orders", customer.Token, order, "Idempotency-Key", "k1")
	replay := stop()
	if res.Status != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", res.Status, res.Header, res.Body)
	}
	// The key was claimed by this process: its record is read ahead of the
	// transaction, which is then never begun (docs/fast-path.md row 12).
	check(t, "replay", replay, []string{"GuardsSet ActorByTokenHash IdempotencyGet"})

	// Another replica, which has not claimed the key, sends the claim with
	// the locks: it finds the record, answers with it and rolls back the
	// locks it did not need (docs/fast-path.md row 13).
	other := httpkit.New(t, testkit.Options{DatabaseURL: e.URL})
	other.Do("GET", "/v1/orders/"+res.String("id"), customer.Token, nil) // puts the token in its cache
	stop = other.Hooks.Record()
	again := other.Do("POST", "/v1/orders", customer.Token, order, "Idempotency-Key", "k1")
	elsewhere := stop()
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(res.Body) {
		t.Fatalf("replay on another replica: %d %v %s", again.Status, again.Header, again.Body)
	}
	check(t, "replay on another replica", elsewhere, []string{
		"begin GuardsSet IdempotencySetLockTimeout IdempotencyClaim IdempotencySetLockTimeout ActorByTokenHash IdempotencyGet ActorLockForOrder StockLockRows",
		"rollback",
	})

	stop = e.Hooks.Record()
	res = e.Do("GET", "/v1/orders/"+res.String("id"), customer.Token, nil)
	read := stop()
	if res.Status != http.StatusOK {
		t.Fatalf("read: %d %s", res.Status, res.Body)
	}
	// One statement (OrderGet joins the lines), the token check and the
	// guards in front of it: outside a transaction the guards go in front
	// of each statement.
	check(t, "order read", read, []string{"GuardsSet ActorByTokenHash OrderGet"})
}

func check(t *testing.T, what string, trips [][]string, want []string) {
	t.Helper()
	got := make([]string, len(trips))
	for i, names := range trips {
		got[i] = strings.Join(names, " ")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %d round trips:\n  %s\nwant %d:\n  %s", what, len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}
