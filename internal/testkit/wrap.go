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
	Products  func(inner app.Tx) app.ProductRepo
	Stock     func(inner app.Tx) app.StockRepo
	Orders    func(inner app.Tx) app.OrderRepo
	Actors    func(inner app.Tx) app.ActorRepo
	Keys      func(inner app.Tx) app.KeyStore
	Outbox    func(inner app.Tx) app.OutboxRepo
	Placement func(inner app.Tx) app.PlacementStore
	Isolation func(asked app.Isolation) app.Isolation
}

// InTx runs fn with the overridden repositories.
func (o Override) InTx(ctx context.Context, iso app.Isolation, fn func(ctx context.Context, tx app.Tx) error) error {
	if o.Isolation != nil {
		iso = o.Isolation(iso)
	}
	return o.Inner.InTx(ctx, iso, func(ctx context.Context, tx app.Tx) error {
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

// Read returns the overridden repositories outside a transaction.
func (o Override) Read() app.Tx { return o.bind(o.Inner.Read()) }

func (o Override) bind(tx app.Tx) overriddenTx {
	t := overriddenTx{Tx: tx, o: o}
	if o.Placement != nil {
		t.placement = o.Placement(tx)
	} else if p, ok := tx.(app.PlacementStore); ok {
		t.placement = p
	}
	return t
}

type overriddenTx struct {
	app.Tx
	o         Override
	placement app.PlacementStore
}

var _ app.PlacementStore = overriddenTx{}

func (t overriddenTx) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	return t.placement.LockForPlacement(ctx, customer, ids)
}

func (t overriddenTx) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	return t.placement.WritePlacement(ctx, o, take)
}

func (t overriddenTx) Products() app.ProductRepo {
	if t.o.Products != nil {
		return t.o.Products(t.Tx)
	}
	return t.Tx.Products()
}

func (t overriddenTx) Stock() app.StockRepo {
	if t.o.Stock != nil {
		return t.o.Stock(t.Tx)
	}
	return t.Tx.Stock()
}

func (t overriddenTx) Orders() app.OrderRepo {
	if t.o.Orders != nil {
		return t.o.Orders(t.Tx)
	}
	return t.Tx.Orders()
}

func (t overriddenTx) Actors() app.ActorRepo {
	if t.o.Actors != nil {
		return t.o.Actors(t.Tx)
	}
	return t.Tx.Actors()
}

func (t overriddenTx) Keys() app.KeyStore {
	if t.o.Keys != nil {
		return t.o.Keys(t.Tx)
	}
	return t.Tx.Keys()
}

func (t overriddenTx) Outbox() app.OutboxRepo {
	if t.o.Outbox != nil {
		return t.o.Outbox(t.Tx)
	}
	return t.Tx.Outbox()
}

// Conn returns the connection (transaction or pool) behind a Tx, so that a
// naive variant can run its statements where the real repository would.
func Conn(tx app.Tx) dbsqlc.DBTX {
	return tx.(interface{ Conn() dbsqlc.DBTX }).Conn()
}
