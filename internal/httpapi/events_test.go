package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
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
func events(t *testing.T, e *httpkit.Env) []storedEvent {
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

func expectStatus(t *testing.T, what string, res *httpkit.Response, status int, code string) {
	t.Helper()
	if res.Err != nil || res.Status != status || (code != "" && res.Code() != code) {
		t.Fatalf("%s: got %d %s (%v), want %d %s", what, res.Status, res.Body, res.Err, status, code)
	}
}

// TestEventsAreWrittenWithTheirChange drives every use case that publishes an
// event through the HTTP API, accepted and rejected, and checks that exactly
// the accepted ones wrote exactly one event each, with a payload a consumer
// can act on (an order event's is the order as the API returns it), and
// that a replayed request wrote none.
func TestEventsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	cust := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 10})
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
	asTheAPIReturnsIt(t, "order.placed", ev, res)
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
	asTheAPIReturnsIt(t, "order.shipped", ev, res)
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
	asTheAPIReturnsIt(t, "order.cancelled", ev, res)
	if ev.AggregateID != second || ev.Data["status"] != "cancelled" {
		t.Errorf("order.cancelled data: %+v", ev)
	}
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events WHERE state = 'pending' AND attempts = 0`); n != int64(want) {
		t.Errorf("%d of %d events are pending and untried, want all", n, want)
	}
}

// asTheAPIReturnsIt fails unless the order event's data is the order as
// the write's answer returned it, member for member (docs/events.md): a
// member added to the API's order and not to the order events, or the
// reverse, is caught here.
func asTheAPIReturnsIt(t *testing.T, what string, ev storedEvent, res *httpkit.Response) {
	t.Helper()
	if !reflect.DeepEqual(ev.Data, res.JSON) {
		t.Errorf("%s data is not the order as the API returned it:\nevent %v\nAPI   %v", what, ev.Data, res.JSON)
	}
}

// ---- the event and its change commit together

// outboxWriter says where a service writes its events: "in the transaction"
// (the real service), or one of two naive variants that a test of the
// outbox must catch.
type outboxWriter string

const (
	inTheTransaction   outboxWriter = "in the transaction"
	beforeCommitOnPool outboxWriter = "on another connection, before the commit"
	afterCommitOnPool  outboxWriter = "on another connection, after the commit"
)

// outboxEnv is the service with its events written by w.
func outboxEnv(t *testing.T, w outboxWriter) *httpkit.Env {
	switch w {
	case beforeCommitOnPool:
		return httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Outbox: func(app.Repositories) app.OutboxRepo { return inner.WithoutTx(nil).Outbox() }}
		}})
	case afterCommitOnPool:
		return httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return afterCommitOutbox{inner}
		}})
	}
	return httpkit.New(t)
}

// afterCommitOutbox keeps the events a use case appends and writes them on
// the pool once its transaction has committed.
type afterCommitOutbox struct{ app.Transactor }

func (a afterCommitOutbox) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	var pending heldEvents
	err := testkit.Override{Inner: a.Transactor, Outbox: func(app.Repositories) app.OutboxRepo {
		return &pending
	}}.InTx(ctx, auth, iso, func(ctx context.Context, tx app.Repositories) error {
		pending = nil // a retried attempt starts over
		return fn(ctx, tx)
	})
	if err != nil {
		return err
	}
	for _, ev := range pending {
		if err := a.WithoutTx(nil).Outbox().Append(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

type heldEvents []app.Event

func (h *heldEvents) Append(_ context.Context, ev app.Event) error {
	*h = append(*h, ev)
	return nil
}

// outboxCase is one use case that appends an event: do sends it, and
// change and events are SQL expressions that count its business change and
// its event.
type outboxCase struct {
	name, change, events string
	do                   func() *httpkit.Response
}

// outboxCases sets up one case per use case that appends an event, each on
// rows of its own.
func outboxCases(t *testing.T, e *httpkit.Env) []outboxCase {
	t.Helper()
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	buyer := e.NewCustomer(1_000_000)
	owner := e.NewCustomer(1_000_000)
	order := func() (string, string) {
		res := e.Do("POST", "/v1/orders", owner.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}}, "Idempotency-Key", newKey())
		expectStatus(t, "setup order", res, http.StatusCreated, "")
		return res.String("id"), res.Header.Get("ETag")
	}
	toPay, _ := order()
	toShip, shipTag := order()
	toCancel, cancelTag := order()
	return []outboxCase{
		{"adjust stock",
			fmt.Sprintf(`(SELECT count(*) FROM stock_adjustments WHERE product_id = '%s')`, product),
			fmt.Sprintf(`(SELECT count(*) FROM outbox_events WHERE type = 'stock.adjusted' AND aggregate_id = '%s')`, product),
			func() *httpkit.Response {
				return e.Do("POST", "/v1/products/"+product+"/stock-adjustments", e.Staff.Token, map[string]any{"delta": 7, "reason": "restock"}, "Idempotency-Key", newKey())
			}},
		{"place order",
			fmt.Sprintf(`(SELECT count(*) FROM orders WHERE customer_id = '%s')`, buyer.ID),
			fmt.Sprintf(`(SELECT count(*) FROM outbox_events WHERE type = 'order.placed' AND payload->>'customer_id' = '%s')`, buyer.ID),
			func() *httpkit.Response {
				return e.Do("POST", "/v1/orders", buyer.Token, map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 2}}}, "Idempotency-Key", newKey())
			}},
		{"record payment",
			fmt.Sprintf(`(SELECT count(*) FROM payments WHERE order_id = '%s')`, toPay),
			fmt.Sprintf(`(SELECT count(*) FROM outbox_events WHERE type = 'payment.recorded' AND aggregate_id = '%s')`, toPay),
			func() *httpkit.Response {
				return e.Do("POST", "/v1/orders/"+toPay+"/payments", owner.Token, map[string]any{"amount_cents": 50}, "Idempotency-Key", newKey())
			}},
		{"ship order",
			fmt.Sprintf(`(SELECT count(*) FROM orders WHERE id = '%s' AND status = 'shipped')`, toShip),
			fmt.Sprintf(`(SELECT count(*) FROM outbox_events WHERE type = 'order.shipped' AND aggregate_id = '%s')`, toShip),
			func() *httpkit.Response {
				return e.Do("POST", "/v1/orders/"+toShip+"/ship", e.Staff.Token, nil, "If-Match", shipTag)
			}},
		{"cancel order",
			fmt.Sprintf(`(SELECT count(*) FROM orders WHERE id = '%s' AND status = 'cancelled')`, toCancel),
			fmt.Sprintf(`(SELECT count(*) FROM outbox_events WHERE type = 'order.cancelled' AND aggregate_id = '%s')`, toCancel),
			func() *httpkit.Response {
				return e.Do("POST", "/v1/orders/"+toCancel+"/cancel", owner.Token, nil, "If-Match", cancelTag)
			}},
	}
}

// seen reads, in one statement and so in one snapshot, how many business
// changes and events of c a reader sees.
func (c outboxCase) seen(t *testing.T, e *httpkit.Env) (changes, events int64) {
	t.Helper()
	if err := e.Pool.QueryRow(context.Background(), `SELECT `+c.change+`, `+c.events).Scan(&changes, &events); err != nil {
		t.Fatal(err)
	}
	return changes, events
}

// eventVisibility runs every case once with the request held at each of the
// points between its business change and the end of its commit where an
// event could be written (before the event's insert, before COMMIT), and
// has a reader look meanwhile. It returns every moment at which the reader
// saw the change without its event or the event without its change.
func eventVisibility(t *testing.T, e *httpkit.Env) []string {
	var broken []string
	for _, at := range []string{"OutboxInsert", "commit"} {
		for _, c := range outboxCases(t, e) {
			stop := e.Hooks.StopFirst(testkit.Before, at, 1)
			out := make(chan *httpkit.Response, 1)
			go func() { out <- c.do() }()
			stop.WaitArrived(t, 10*time.Second)
			changes, events := c.seen(t, e)
			stop.Release()
			res := <-out
			if res.Status >= 300 {
				t.Fatalf("%s: %d %s", c.name, res.Status, res.Body)
			}
			doneChanges, doneEvents := c.seen(t, e)
			t.Logf("%s, held before %s: reader saw %d changes and %d events; after the answer %d and %d", c.name, at, changes, events, doneChanges, doneEvents)
			if changes != events {
				broken = append(broken, fmt.Sprintf("%s, held before %s: a reader saw %d changes and %d events", c.name, at, changes, events))
			}
			if doneChanges != 1 || doneEvents != 1 {
				broken = append(broken, fmt.Sprintf("%s: %d changes and %d events after the answer, want 1 and 1", c.name, doneChanges, doneEvents))
			}
		}
	}
	return broken
}

// TestOutboxEventBecomesVisibleWithItsChange: for every use case that
// publishes, a reader never sees the business change without its event or
// the event without its change, however the request is held between its
// change and its commit (EXT.CONCURRENCY.ADOPT.001: the event rides in the
// change's transaction). The two naive variants write the event on another
// connection, one before the commit (the event shows while the change is
// still uncommitted) and one after it (the change shows while the event is
// not written yet); both are caught.
//
// Patterns and rule ids: docs/patterns.md.
func TestOutboxEventBecomesVisibleWithItsChange(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range eventVisibility(t, outboxEnv(t, inTheTransaction)) {
			t.Error(b)
		}
	})
	for _, w := range []outboxWriter{beforeCommitOnPool, afterCommitOnPool} {
		t.Run("naive: event written "+string(w)+" is caught", func(t *testing.T) {
			t.Parallel()
			broken := eventVisibility(t, outboxEnv(t, w))
			if len(broken) == 0 {
				t.Fatalf("events written %s: no reader saw one without the other; the test cannot tell", w)
			}
			t.Logf("naive variant caught, as it must be: %v", broken)
		})
	}
}

// eventFailure makes every event insert fail in the database (a CHECK that
// no row passes, NOT VALID so that the rows already there stay) and runs
// every case. It returns every case that was not answered with a 5xx or
// whose business change, key record or event survived the failed insert.
func eventFailure(t *testing.T, e *httpkit.Env) []string {
	cases := outboxCases(t, e)
	keysBefore := e.QueryInt(`SELECT count(*) FROM idempotency_keys`)
	e.Exec(`ALTER TABLE outbox_events ADD CONSTRAINT refuse_every_event CHECK (false) NOT VALID`)
	var broken []string
	for _, c := range cases {
		res := c.do()
		changes, events := c.seen(t, e)
		t.Logf("%s with the event insert failing: %d %s; %d changes, %d events", c.name, res.Status, res.Code(), changes, events)
		if res.Status < 500 {
			broken = append(broken, fmt.Sprintf("%s: answered %d %s although its event could not be written", c.name, res.Status, res.Body))
		}
		if changes != 0 || events != 0 {
			broken = append(broken, fmt.Sprintf("%s: %d changes and %d events survived the failed event insert", c.name, changes, events))
		}
	}
	if n := e.QueryInt(`SELECT count(*) FROM idempotency_keys`); n != keysBefore {
		broken = append(broken, fmt.Sprintf("%d idempotency records were stored by failed requests", n-keysBefore))
	}
	e.Exec(`ALTER TABLE outbox_events DROP CONSTRAINT refuse_every_event`)
	return broken
}

// TestOutboxFailureRollsBackTheChange: when the event's insert fails, the
// whole transaction fails with it: no business change, no event and no
// idempotency record survive, and the client gets a 5xx it may retry. The
// naive variant that writes the event after the commit on another connection
// is caught: its changes survive without their events.
func TestOutboxFailureRollsBackTheChange(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range eventFailure(t, outboxEnv(t, inTheTransaction)) {
			t.Error(b)
		}
	})
	t.Run("naive: event written "+string(afterCommitOnPool)+" is caught", func(t *testing.T) {
		t.Parallel()
		broken := eventFailure(t, outboxEnv(t, afterCommitOnPool))
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: the test cannot tell")
		}
		t.Logf("naive variant caught, as it must be: %v", broken)
	})
}
