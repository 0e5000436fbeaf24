package testkit

import (
	"context"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// Override is a transactor whose repositories, key store or isolation level
// can be swapped, so that a race test can run once against a deliberately
// naive variant of one mechanism and show that it catches the bug.
//
// Order placement runs through the repositories' placement store, the
// pipelined path that production runs, whatever else is overridden:
// Placement replaces it (a naive placement, or store.StepwisePlacement for
// the plain path), and without it the real one runs. The Products, Actors
// and Orders overrides apply to the other use cases.
type Override struct {
	Inner     app.Transactor
	Products  func(inner app.Repositories) app.ProductRepo
	Stock     func(inner app.Repositories) app.StockRepo
	Orders    func(inner app.Repositories) app.OrderRepo
	Actors    func(inner app.Repositories) app.ActorRepo
	Keys      func(inner app.Repositories) app.KeyStore
	Outbox    func(inner app.Repositories) app.OutboxRepo
	Placement func(inner app.Repositories) app.PlacementStore
	Isolation func(asked app.Isolation) app.Isolation
}

// InTx runs fn with the overridden repositories.
func (o Override) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	if o.Isolation != nil {
		iso = o.Isolation(iso)
	}
	return o.Inner.InTx(ctx, auth, iso, func(ctx context.Context, tx app.Repositories) error {
		return fn(ctx, o.bind(tx))
	})
}

// WithoutTx returns the overridden repositories outside a transaction.
func (o Override) WithoutTx(auth *app.AuthCheck) app.Repositories {
	return o.bind(o.Inner.WithoutTx(auth))
}

func (o Override) bind(tx app.Repositories) overriddenRepos {
	return overriddenRepos{Repositories: tx, o: o}
}

type overriddenRepos struct {
	app.Repositories
	o Override
}

func (t overriddenRepos) Placement() app.PlacementStore {
	if t.o.Placement != nil {
		return t.o.Placement(t.Repositories)
	}
	return t.Repositories.Placement()
}

func (t overriddenRepos) Products() app.ProductRepo {
	if t.o.Products != nil {
		return t.o.Products(t.Repositories)
	}
	return t.Repositories.Products()
}

func (t overriddenRepos) Stock() app.StockRepo {
	if t.o.Stock != nil {
		return t.o.Stock(t.Repositories)
	}
	return t.Repositories.Stock()
}

func (t overriddenRepos) Orders() app.OrderRepo {
	if t.o.Orders != nil {
		return t.o.Orders(t.Repositories)
	}
	return t.Repositories.Orders()
}

func (t overriddenRepos) Actors() app.ActorRepo {
	if t.o.Actors != nil {
		return t.o.Actors(t.Repositories)
	}
	return t.Repositories.Actors()
}

func (t overriddenRepos) Keys() app.KeyStore {
	if t.o.Keys != nil {
		return t.o.Keys(t.Repositories)
	}
	return t.Repositories.Keys()
}

func (t overriddenRepos) Outbox() app.OutboxRepo {
	if t.o.Outbox != nil {
		return t.o.Outbox(t.Repositories)
	}
	return t.Repositories.Outbox()
}

// Conn returns the connection (transaction or pool) behind a Repositories, so that a
// naive variant can run its statements where the real repository would.
func Conn(tx app.Repositories) dbsqlc.DBTX {
	return tx.(interface{ Conn() dbsqlc.DBTX }).Conn()
}
