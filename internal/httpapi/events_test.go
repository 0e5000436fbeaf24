package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

var keySeq atomic.Int64

func newKey() string { return fmt.Sprintf("events-test-%d", keySeq.Add(1)) }

// storedEvent is one outbox row as a consumer would see it.
type storedEvent struct {
	Type        string
	AggregateID string
	Data        map[string]any
}

// events returns the outbox rows in insertion order.
func events(t *testing.T, e *testkit.Env) []storedEvent {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT type, aggregate_id::text, payload FROM outbox_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var ev storedEvent
		var raw []byte
		if err := rows.Scan(&ev.Type, &ev.AggregateID, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &ev.Data); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func expectStatus(t *testing.T, what string, res *testkit.Response, status int, code string) {
	t.Helper()
	if res.Err != nil || res.Status != status || (code != "" && res.Code() != code) {
		t.Fatalf("%s: got %d %s (%v), want %d %s", what, res.Status, res.Body, res.Err, status, code)
	}
}

// TestEventsAreWrittenWithTheirChange drives every use case that publishes an
// event through the HTTP API, accepted and rejected, and checks that exactly
// the accepted ones wrote exactly one event each, with a payload a consumer
// can act on, and that a replayed request wrote none.
func TestEventsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	cust := e.NewActor("customer", 1_000_000)
	product := e.NewProduct(250, 10)
	want := 0
	check := func(what string, wantType string) storedEvent {
		t.Helper()
		evs := events(t, e)
		if wantType != "" {
			want++
		}
		if len(evs) != want {
			t.Fatalf("after %s: %d events, want %d: %+v", what, len(evs), want, evs)
		}
		if wantType == "" {
			return storedEvent{}
		}
		last := evs[len(evs)-1]
		if last.Type != wantType {
			t.Fatalf("after %s: last event is %s, want %s", what, last.Type, wantType)
		}
		return last
	}

	// stock.adjusted
	res := e.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, map[string]any{"delta": 5, "reason": "restock"}, "Idempotency-Key", newKey())
	expectStatus(t, "adjust", res, http.StatusCreated, "")
	ev := check("adjust", "stock.adjusted")
	if ev.AggregateID != product || ev.Data["product_id"] != product || ev.Data["delta"] != 5.0 || ev.Data["stock"] != 15.0 ||
		ev.Data["reason"] != "restock" || ev.Data["actor_id"] != e.Staff.ID || ev.Data["sku"] == "" {
		t.Errorf("stock.adjusted data: %+v", ev)
	}
	res = e.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, map[string]any{"delta": -100, "reason": "shrink"}, "Idempotency-Key", newKey())
	expectStatus(t, "adjust below zero", res, http.StatusConflict, "insufficient_stock")
	check("rejected adjust", "")

	// order.placed, and a replay that writes nothing
	placeKey := newKey()
	body := map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 2}}}
	res = e.Do("POST", "/v1/orders", cust.Token, body, "Idempotency-Key", placeKey)
	expectStatus(t, "place", res, http.StatusCreated, "")
	order := res.String("id")
	ev = check("place", "order.placed")
	lines, _ := ev.Data["lines"].([]any)
	if ev.AggregateID != order || ev.Data["id"] != order || ev.Data["customer_id"] != cust.ID || ev.Data["status"] != "placed" ||
		ev.Data["total_cents"] != 500.0 || ev.Data["paid_cents"] != 0.0 || len(lines) != 1 {
		t.Errorf("order.placed data: %+v", ev)
	} else if l := lines[0].(map[string]any); l["product_id"] != product || l["quantity"] != 2.0 || l["unit_price_cents"] != 250.0 {
		t.Errorf("order.placed line: %+v", l)
	}
	res = e.Do("POST", "/v1/orders", cust.Token, body, "Idempotency-Key", placeKey)
	expectStatus(t, "replayed place", res, http.StatusCreated, "")
	if res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second place was not replayed: %v", res.Header)
	}
	check("replayed place", "")
	res = e.Do("POST", "/v1/orders", cust.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1000}}}, "Idempotency-Key", newKey())
	expectStatus(t, "place too many", res, http.StatusConflict, "insufficient_stock")
	check("rejected place", "")

	// payment.recorded
	res = e.Do("POST", "/v1/orders/"+order+"/payments", cust.Token, map[string]any{"amount_cents": 200}, "Idempotency-Key", newKey())
	expectStatus(t, "pay", res, http.StatusCreated, "")
	ev = check("pay", "payment.recorded")
	if ev.AggregateID != order || ev.Data["order_id"] != order || ev.Data["amount_cents"] != 200.0 || ev.Data["paid_cents"] != 200.0 ||
		ev.Data["total_cents"] != 500.0 || ev.Data["customer_id"] != cust.ID || ev.Data["order_status"] != "placed" {
		t.Errorf("payment.recorded data: %+v", ev)
	}
	res = e.Do("POST", "/v1/orders/"+order+"/payments", cust.Token, map[string]any{"amount_cents": 400}, "Idempotency-Key", newKey())
	expectStatus(t, "overpay", res, http.StatusConflict, "overpayment")
	check("rejected payment", "")

	// order.shipped; then a cancel of the shipped order is refused
	res = e.Do("POST", "/v1/orders/"+order+"/ship", e.Staff.Token, nil, "If-Match", `"v2"`)
	expectStatus(t, "ship", res, http.StatusOK, "")
	ev = check("ship", "order.shipped")
	if ev.AggregateID != order || ev.Data["status"] != "shipped" || ev.Data["paid_cents"] != 200.0 {
		t.Errorf("order.shipped data: %+v", ev)
	}
	res = e.Do("POST", "/v1/orders/"+order+"/cancel", cust.Token, nil, "If-Match", res.Header.Get("ETag"))
	expectStatus(t, "cancel shipped", res, http.StatusConflict, "invalid_transition")
	check("rejected cancel", "")

	// order.cancelled
	res = e.Do("POST", "/v1/orders", cust.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 3}}}, "Idempotency-Key", newKey())
	expectStatus(t, "place second", res, http.StatusCreated, "")
	second := res.String("id")
	check("place second", "order.placed")
	res = e.Do("POST", "/v1/orders/"+second+"/cancel", cust.Token, nil, "If-Match", res.Header.Get("ETag"))
	expectStatus(t, "cancel", res, http.StatusOK, "")
	ev = check("cancel", "order.cancelled")
	if ev.AggregateID != second || ev.Data["status"] != "cancelled" {
		t.Errorf("order.cancelled data: %+v", ev)
	}
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events WHERE state = 'pending' AND attempts = 0`); n != int64(want) {
		t.Errorf("%d of %d events are pending and untried, want all", n, want)
	}
}

// failingOutbox appends the event for real and then fails, as if the
// transaction broke right after: the event must vanish with the change.
type failingOutbox struct{ inner app.OutboxRepo }

func (f failingOutbox) Append(ctx context.Context, ev app.Event) error {
	if err := f.inner.Append(ctx, ev); err != nil {
		return err
	}
	return errors.New("injected failure after the event was written")
}

// TestEventCommitsOnlyWithItsChange shows that the outbox row is written in
// the use case's own transaction: when the transaction fails after the event
// was appended, neither the business change nor the event nor the
// idempotency record survives. An event written on another connection would
// survive the rollback.
func TestEventCommitsOnlyWithItsChange(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Outbox: func(tx app.Tx) app.OutboxRepo {
			if fail.Load() {
				return failingOutbox{tx.Outbox()}
			}
			return tx.Outbox()
		}}
	}})
	cust := e.NewActor("customer", 1_000_000)
	product := e.NewProduct(100, 10)
	res := e.Do("POST", "/v1/orders", cust.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}}, "Idempotency-Key", newKey())
	expectStatus(t, "place", res, http.StatusCreated, "")
	order, etag := res.String("id"), res.Header.Get("ETag")
	before := e.QueryInt(`SELECT count(*) FROM outbox_events`)
	fail.Store(true)

	cases := []struct {
		name            string
		do              func() *testkit.Response
		changeUnchanged string // a query that returns 1 when nothing changed
	}{
		{"adjust stock", func() *testkit.Response {
			return e.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, map[string]any{"delta": 7, "reason": "restock"}, "Idempotency-Key", newKey())
		}, fmt.Sprintf(`SELECT count(*) FROM products WHERE id = '%s' AND stock = 9 AND NOT EXISTS (SELECT 1 FROM stock_adjustments)`, product)},
		{"place order", func() *testkit.Response {
			return e.Do("POST", "/v1/orders", cust.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 2}}}, "Idempotency-Key", newKey())
		}, fmt.Sprintf(`SELECT count(*) FROM products WHERE id = '%s' AND stock = 9 AND (SELECT count(*) FROM orders) = 1`, product)},
		{"record payment", func() *testkit.Response {
			return e.Do("POST", "/v1/orders/"+order+"/payments", cust.Token, map[string]any{"amount_cents": 50}, "Idempotency-Key", newKey())
		}, fmt.Sprintf(`SELECT count(*) FROM orders WHERE id = '%s' AND paid_cents = 0 AND NOT EXISTS (SELECT 1 FROM payments)`, order)},
		{"ship order", func() *testkit.Response {
			return e.Do("POST", "/v1/orders/"+order+"/ship", e.Staff.Token, nil, "If-Match", etag)
		}, fmt.Sprintf(`SELECT count(*) FROM orders WHERE id = '%s' AND status = 'placed' AND version = 1`, order)},
		{"cancel order", func() *testkit.Response {
			return e.Do("POST", "/v1/orders/"+order+"/cancel", cust.Token, nil, "If-Match", etag)
		}, fmt.Sprintf(`SELECT count(*) FROM orders WHERE id = '%s' AND status = 'placed' AND version = 1 AND (SELECT stock FROM products) = 9`, order)},
	}
	for _, c := range cases {
		res := c.do()
		if res.Err != nil || res.Status != http.StatusInternalServerError {
			t.Errorf("%s: got %d %s (%v), want 500 from the injected failure", c.name, res.Status, res.Body, res.Err)
		}
		if e.QueryInt(c.changeUnchanged) != 1 {
			t.Errorf("%s: the business change survived the failed transaction", c.name)
		}
		if n := e.QueryInt(`SELECT count(*) FROM outbox_events`); n != before {
			t.Errorf("%s: %d events, want %d: the event survived its transaction", c.name, n, before)
		}
	}
	if n := e.QueryInt(`SELECT count(*) FROM idempotency_keys`); n != 1 {
		t.Errorf("%d idempotency records, want only the first placement's", n)
	}
}
