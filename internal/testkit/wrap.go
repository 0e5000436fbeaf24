package testkit

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// Override is a transactor whose repositories, key store or isolation level
// can be swapped, so that a race test can run once against a deliberately
// naive variant of one mechanism and show that it catches the bug.
//
// Order placement runs through app.PlacementStore, the pipelined path that
// production runs, whatever else is overridden: Placement replaces it (a
// naive placement), and without it the real one runs. The Products, Actors
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
func (o Override) InTx(ctx context.Context, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	if o.Isolation != nil {
		iso = o.Isolation(iso)
	}
	return o.Inner.InTx(ctx, iso, func(ctx context.Context, tx app.Repositories) error {
		return fn(ctx, o.bind(tx))
	})
}

// LatchKey forwards to the inner transactor's in-process key latch, when it
// has one, so that a wrapped service waits for keys as the real one does.
func (o Override) LatchKey(ctx context.Context, k app.Key) (context.Context, func(), error) {
	if l, ok := o.Inner.(app.KeyLatch); ok {
		return l.LatchKey(ctx, k)
	}
	return ctx, func() {}, nil
}

// WithoutTx returns the overridden repositories outside a transaction.
func (o Override) WithoutTx() app.Repositories { return o.bind(o.Inner.WithoutTx()) }

func (o Override) bind(tx app.Repositories) overriddenRepos {
	t := overriddenRepos{Repositories: tx, o: o}
	if o.Placement != nil {
		t.placement = o.Placement(tx)
	} else if p, ok := tx.(app.PlacementStore); ok {
		t.placement = p
	}
	return t
}

type overriddenRepos struct {
	app.Repositories
	o         Override
	placement app.PlacementStore
}

var _ app.PlacementStore = overriddenRepos{}

func (t overriddenRepos) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	return t.placement.LockForPlacement(ctx, customer, ids)
}

func (t overriddenRepos) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	return t.placement.WritePlacement(ctx, o, take)
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
