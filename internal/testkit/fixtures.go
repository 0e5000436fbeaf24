package testkit

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// The fixtures: actors, products and order lines made for a test, through
// the use cases (never by SQL, so that they are what the service would have
// made). Their arguments are typed and named: a fixture reads as what it
// makes.

// Actor is an actor made for a test, with its token.
type Actor struct {
	ID    string
	Token string
}

var actorSeq atomic.Int64

// NewStaff creates a staff member.
func (e *Env) NewStaff() Actor {
	e.T.Helper()
	return e.newActor("staff", 0)
}

// NewCustomer creates a customer with a credit limit.
func (e *Env) NewCustomer(creditLimitCents int64) Actor {
	e.T.Helper()
	return e.newActor("customer", creditLimitCents)
}

// newActor creates an actor with a token, through the use case with the
// real transactor (never a naive variant under test).
func (e *Env) newActor(role string, creditLimitCents int64) Actor {
	e.T.Helper()
	out, err := app.CreateActor{Transactor: e.Runner}.Handle(context.Background(), app.CreateActorCommand{
		Name: fmt.Sprintf("%s %d", role, actorSeq.Add(1)), Role: role, CreditLimitCents: creditLimitCents,
	})
	if err != nil {
		e.T.Fatalf("create %s: %v", role, err)
	}
	return Actor{ID: out.Actor.ID.String(), Token: out.Token}
}

// ProductSpec is a product to make: its price and its initial stock. Its
// SKU is made unique.
type ProductSpec struct {
	PriceCents int64
	Stock      int64
}

var skuSeq atomic.Int64

// NewProduct creates a product, as the staff member Env.Staff, through the
// use case the service runs (Options.Wrap applied), and returns its id.
func (e *Env) NewProduct(p ProductSpec) string {
	e.T.Helper()
	cmd := app.CreateProductCommand{SKU: fmt.Sprintf("SKU-%d", skuSeq.Add(1)), Name: "Test product", PriceCents: p.PriceCents, Stock: p.Stock}
	var made *domain.Product
	_, err := e.App.CreateProduct().Handle(context.Background(), cmd, app.Call[*domain.Product]{
		Principal: app.Principal{ID: uuid.MustParse(e.Staff.ID), Role: domain.RoleStaff, Active: true},
		Render:    func(p *domain.Product) (app.Receipt, error) { made = p; return app.Receipt{}, nil },
	})
	if err != nil {
		e.T.Fatalf("create product: %v", err)
	}
	return made.ID().String()
}

// OrderLine is one line of an order to place; as JSON it is the API's.
type OrderLine struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

// Line is the order line of quantity of product (an id).
func Line(product string, quantity int) OrderLine {
	return OrderLine{ProductID: product, Quantity: quantity}
}
