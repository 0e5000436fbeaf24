package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// The tests of this package call the use cases directly, against the real
// infra on a database of their own (testkit.Env), without HTTP in between:
// they prove the use cases' invariants. What only HTTP does (If-Match and
// Idempotency-Key parsing, replayed bodies) is tested in internal/httpapi.

// caller is an actor calling the use cases of an Env, as the HTTP layer
// calls them: each call authenticates the actor's token first
// (app.Authenticate), so that a token revoked in between is refused the
// same way.
type caller struct {
	t     testing.TB
	e     *testkit.Env
	actor testkit.Actor
}

func as(e *testkit.Env, a testkit.Actor) caller { return caller{t: e.T, e: e, actor: a} }

// call authenticates the caller and returns the context and Call to run a
// command with, keyed by key when it is not empty.
func call[T any](c caller, operation, key string, cmd any) (context.Context, app.Call[T], *T) {
	ctx := context.Background()
	p, check, err := c.e.App.Authenticate.Handle(ctx, c.actor.Token)
	if err != nil {
		c.t.Fatalf("authenticate %s: %v", c.actor.ID, err)
	}
	out := new(T)
	cl := app.Call[T]{Principal: p, Auth: check, Render: func(v T) (app.Receipt, error) {
		*out = v
		// A replay gives back the receipt, not the value: tests read the
		// state from the database instead.
		return app.Receipt{Status: 200, Body: []byte("{}")}, nil
	}}
	if key != "" {
		body, err := json.Marshal(cmd)
		if err != nil {
			c.t.Fatal(err)
		}
		cl.Key = &app.Key{ActorID: p.ID, Operation: operation, Value: key, Fingerprint: sha256.Sum256(body)}
	}
	return ctx, cl, out
}

// place places an order of lines (testkit.Line). A replayed placement
// returns a nil order.
func (c caller) place(key string, lines ...testkit.OrderLine) (*domain.Order, error) {
	var cmd app.PlaceOrderCommand
	for _, l := range lines {
		cmd.Lines = append(cmd.Lines, domain.LineRequest{ProductID: uuid.MustParse(l.ProductID), Quantity: domain.Quantity(l.Quantity)})
	}
	ctx, cl, out := call[*domain.Order](c, "placeOrder", key, cmd)
	_, err := c.e.App.PlaceOrder().Handle(ctx, cmd, cl)
	return *out, err
}

// mustPlace places an order that must be accepted.
func (c caller) mustPlace(key string, lines ...testkit.OrderLine) *domain.Order {
	c.t.Helper()
	o, err := c.place(key, lines...)
	if err != nil || o == nil {
		c.t.Fatalf("place: %v", err)
	}
	return o
}

func (c caller) pay(order uuid.UUID, key string, amount int64) error {
	cmd := app.RecordPaymentCommand{OrderID: order, Amount: domain.Cents(amount)}
	ctx, cl, _ := call[app.PaymentRecorded](c, "recordPayment", key, cmd)
	_, err := c.e.App.RecordPayment().Handle(ctx, cmd, cl)
	return err
}

func (c caller) cancel(order uuid.UUID, version domain.Version) (*domain.Order, error) {
	cmd := app.CancelOrderCommand{ID: order, Expected: []domain.Version{version}}
	ctx, cl, out := call[*domain.Order](c, "cancelOrder", "", cmd)
	_, err := c.e.App.CancelOrder().Handle(ctx, cmd, cl)
	return *out, err
}

func (c caller) ship(order uuid.UUID, version domain.Version) (*domain.Order, error) {
	cmd := app.ShipOrderCommand{ID: order, Expected: []domain.Version{version}}
	ctx, cl, out := call[*domain.Order](c, "shipOrder", "", cmd)
	_, err := c.e.App.ShipOrder().Handle(ctx, cmd, cl)
	return *out, err
}

func (c caller) deactivate(target testkit.Actor) error {
	cmd := app.DeactivateActorCommand{ID: uuid.MustParse(target.ID)}
	ctx, cl, _ := call[domain.Actor](c, "deactivateActor", "", cmd)
	_, err := c.e.App.DeactivateActor().Handle(ctx, cmd, cl)
	return err
}

// code is the error's stable code: "" for success, internal for an error
// without one.
func code(err error) domain.Code {
	if err == nil {
		return ""
	}
	if c := domain.ErrorCode(err); c != "" {
		return c
	}
	return domain.CodeInternal
}

func countCode(codes []domain.Code, want domain.Code) int {
	n := 0
	for _, c := range codes {
		if c == want {
			n++
		}
	}
	return n
}

func stockOf(e *testkit.Env, product string) int64 {
	return e.QueryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, product)
}

func orderStatus(e *testkit.Env, id uuid.UUID) string {
	e.T.Helper()
	var status string
	if err := e.Pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE id = $1`, id).Scan(&status); err != nil {
		e.T.Fatal(err)
	}
	return status
}

func (c caller) adjust(product, key string, delta int64, reason string) error {
	cmd := app.AdjustStockCommand{ProductID: uuid.MustParse(product), Delta: delta, Reason: reason}
	ctx, cl, _ := call[app.StockAdjusted](c, "adjustStock", key, cmd)
	_, err := c.e.App.AdjustStock().Handle(ctx, cmd, cl)
	return err
}
