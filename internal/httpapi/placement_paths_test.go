package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestPlacementPathsWriteIdenticalRows: the pipelined placement (the
// production path, the repositories' Placement()) and the stepwise one
// (store.StepwisePlacement, built from the other repositories) leave the
// same rows behind for the same requests: orders, lines with their prices,
// stock levels and their versions, untouched product versions, events, and
// nothing at all for a refused order.
func TestPlacementPathsWriteIdenticalRows(t *testing.T) {
	t.Parallel()
	pipelined := httpkit.New(t)
	stepwise := httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Placement: store.StepwisePlacement}
	}})
	for name, c := range map[string]struct {
		e    *httpkit.Env
		want bool
	}{"pipelined": {pipelined, false}, "stepwise": {stepwise, true}} {
		err := c.e.App.PlaceOrder().Transactor.InTx(context.Background(), nil, app.ReadCommitted, func(_ context.Context, tx app.Repositories) error {
			got := tx.Placement()
			if isStepwise := reflect.TypeOf(got) == reflect.TypeOf(store.StepwisePlacement(tx)); isStepwise != c.want {
				t.Errorf("%s: the placement store is %T, stepwise %v, want %v", name, got, isStepwise, c.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	a, b := placementScenario(t, pipelined), placementScenario(t, stepwise)
	if !slices.Equal(a, b) {
		t.Fatalf("the two paths wrote different rows\npipelined:\n  %s\nstepwise:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
	t.Logf("identical rows:\n  %s", strings.Join(a, "\n  "))
}

// placementScenario places orders (lines in both orders, a refused one, a
// cancelled one, a price edit in between) and returns every row they wrote,
// with ids and times replaced by stable names.
func placementScenario(t *testing.T, e *httpkit.Env) []string {
	t.Helper()
	alice, bob := e.NewCustomer(1_000_000), e.NewCustomer(1_000_000)
	names := map[string]string{alice.ID: "alice", bob.ID: "bob"}
	products := make([]string, 3)
	for i := range products {
		products[i] = e.NewProduct(testkit.ProductSpec{PriceCents: int64(100 * (i + 1)), Stock: 10})
		names[products[i]] = fmt.Sprintf("product-%d", i)
	}
	want := func(res *httpkit.Response, status int) *httpkit.Response {
		t.Helper()
		if res.Status != status {
			t.Fatalf("%d %s, want %d", res.Status, res.Body, status)
		}
		return res
	}
	o1 := want(e.PlaceOrder(alice.Token, "o1", testkit.Line(products[2], 3), testkit.Line(products[0], 1)), http.StatusCreated)
	o2 := want(e.PlaceOrder(bob.Token, "o2", testkit.Line(products[0], 2), testkit.Line(products[1], 4)), http.StatusCreated)
	want(e.Do("PATCH", "/v1/products/"+products[1], e.Staff.Token, map[string]any{"price_cents": 250}, "If-Match", `"v1"`), http.StatusOK)
	o3 := want(e.PlaceOrder(alice.Token, "o3", testkit.Line(products[1], 5), testkit.Line(products[2], 2)), http.StatusCreated)
	want(e.PlaceOrder(bob.Token, "o4", testkit.Line(products[1], 1), testkit.Line(products[2], 6)), http.StatusConflict) // product-2 has 5 left
	want(e.Do("POST", "/v1/orders/"+o1.String("id")+"/cancel", alice.Token, nil, "If-Match", `"v1"`), http.StatusOK)
	names[o1.String("id")], names[o2.String("id")], names[o3.String("id")] = "order-1", "order-2", "order-3"

	var rows []string
	for _, q := range []string{
		`SELECT 'order', customer_id::text, status, total_cents, paid_cents, version FROM orders ORDER BY id`,
		`SELECT 'line', o.customer_id::text || ' ' || o.total_cents, l.product_id::text, l.line_no, l.quantity, l.unit_price_cents
		   FROM order_lines l JOIN orders o ON o.id = l.order_id ORDER BY l.order_id, l.line_no`,
		`SELECT 'stock', s.product_id::text, '', s.stock, s.version, p.version FROM stock_levels s JOIN products p ON p.id = s.product_id ORDER BY p.id`,
		`SELECT 'product', id::text, name, price_cents, version, 0 FROM products ORDER BY id`,
		`SELECT 'event', type, aggregate_id::text, jsonb_array_length(COALESCE(payload->'lines', '[]')), COALESCE((payload->>'total_cents')::bigint, 0), 0
		   FROM outbox_events ORDER BY occurred_at, id`,
		`SELECT 'key', operation, key, response_status, 0, 0 FROM idempotency_keys WHERE operation = 'placeOrder' ORDER BY key`,
	} {
		r, err := e.Pool.Query(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for r.Next() {
			var kind, x, y string
			var n1, n2, n3 int64
			if err := r.Scan(&kind, &x, &y, &n1, &n2, &n3); err != nil {
				t.Fatal(err)
			}
			for id, name := range names {
				x, y = strings.ReplaceAll(x, id, name), strings.ReplaceAll(y, id, name)
			}
			rows = append(rows, fmt.Sprintf("%s %s %s %d %d %d", kind, x, y, n1, n2, n3))
		}
		r.Close()
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}
