package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

type seededActor struct {
	Name             string `json:"name"`
	Role             string `json:"role"`
	ActorID          string `json:"actor_id"`
	Token            string `json:"token"`
	CreditLimitCents int64  `json:"credit_limit_cents,omitempty"`
}

type seededProduct struct {
	ID    string `json:"id"`
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
	// Created is false for a demo product an earlier seed made, kept as it
	// is (its stock may have moved since).
	Created bool `json:"created"`
}

// seedOutput is what seed prints.
type seedOutput struct {
	Actors   []seededActor   `json:"actors"`
	Products []seededProduct `json:"products"`
}

// seed creates a staff member, two customers and a few products, and prints
// their tokens and ids, so that someone who just started the service can
// call it at once. Products whose SKU exists are kept; actors are always
// new, because a token cannot be shown twice. It prints what it made: the
// three actors, and its four demo products, each marked created or kept by
// an earlier seed; never another product of the database.
func seed(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	c, pool, err := connect(ctx, getenv, "seed")
	if err != nil {
		return err
	}
	defer pool.Close()
	runner := newRunner(pool, newLogger(io.Discard, slog.LevelError), nil, c)

	var out seedOutput
	staff, err := out.seedActors(ctx, app.CreateActor{Transactor: runner})
	if err != nil {
		return err
	}
	uc := app.New(app.Deps{Transactor: runner, Reader: runner, Latch: runner})
	kept, err := out.seedProducts(ctx, uc, staff)
	if err != nil {
		return err
	}
	if err := out.findKept(ctx, uc, kept); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// seedActors creates the demo actors and returns the staff member.
func (out *seedOutput) seedActors(ctx context.Context, create app.CreateActor) (app.Principal, error) {
	var staff app.Principal
	for _, a := range []app.CreateActorCommand{
		{Name: "Demo Staff", Role: "staff"},
		{Name: "Alice", Role: "customer", CreditLimitCents: 100_000_00},
		{Name: "Bob", Role: "customer", CreditLimitCents: 500_00},
	} {
		res, err := create.Handle(ctx, a)
		if err != nil {
			return staff, fmt.Errorf("seed actor %s: %w", a.Name, err)
		}
		if a.Role == "staff" {
			staff = app.Principal{ID: res.Actor.ID, Role: domain.RoleStaff, Active: true}
		}
		out.Actors = append(out.Actors, seededActor{Name: a.Name, Role: a.Role, ActorID: res.Actor.ID.String(), Token: res.Token, CreditLimitCents: a.CreditLimitCents})
	}
	return staff, nil
}

// seedProducts creates the demo products whose SKU is free and returns the
// SKUs of those an earlier seed made.
func (out *seedOutput) seedProducts(ctx context.Context, uc app.UseCases, staff app.Principal) (kept []string, err error) {
	for _, p := range []app.CreateProductCommand{
		{SKU: "DEMO-MUG", Name: "Enamel mug", PriceCents: 1200, Stock: 100},
		{SKU: "DEMO-TEE", Name: "Cotton T-shirt", PriceCents: 2500, Stock: 50},
		{SKU: "DEMO-CAP", Name: "Baseball cap", PriceCents: 1800, Stock: 10},
		{SKU: "DEMO-PEN", Name: "Ballpoint pen", PriceCents: 150, Stock: 1000},
	} {
		var made *domain.Product
		_, err := uc.CreateProduct().Handle(ctx, p, app.Call[*domain.Product]{
			Principal: staff,
			Render:    func(p *domain.Product) (app.Receipt, error) { made = p; return app.Receipt{}, nil },
		})
		switch {
		case err == nil:
			out.Products = append(out.Products, seededProduct{ID: made.ID().String(), SKU: p.SKU, Stock: p.Stock, Created: true})
		case domain.ErrorCode(err) == domain.CodeSKUTaken:
			kept = append(kept, p.SKU)
		default:
			return nil, fmt.Errorf("seed product %s: %w", p.SKU, err)
		}
	}
	return kept, nil
}

// findKept adds the demo products of an earlier seed: found by SKU, newest
// first.
func (out *seedOutput) findKept(ctx context.Context, uc app.UseCases, kept []string) error {
	for page := (app.Page{Limit: 100}); len(kept) > 0; {
		products, err := uc.ListProducts().Handle(ctx, nil, page)
		if err != nil {
			return err
		}
		if kept, err = out.addKept(ctx, uc, products, kept); err != nil {
			return err
		}
		if len(products) < page.Limit {
			return nil
		}
		page.Before = products[len(products)-1].ID()
	}
	return nil
}

// addKept adds those of products whose SKU is in kept and returns the SKUs
// still to find.
func (out *seedOutput) addKept(ctx context.Context, uc app.UseCases, products []*domain.Product, kept []string) ([]string, error) {
	for _, p := range products {
		i := slices.Index(kept, string(p.SKU()))
		if i < 0 {
			continue
		}
		kept = slices.Delete(kept, i, i+1)
		level, err := uc.GetStock().Handle(ctx, nil, p.ID(), 0)
		if err != nil {
			return nil, fmt.Errorf("seed: stock of %s: %w", p.SKU(), err)
		}
		out.Products = append(out.Products, seededProduct{ID: p.ID().String(), SKU: string(p.SKU()), Stock: level.Stock()})
	}
	return kept, nil
}
