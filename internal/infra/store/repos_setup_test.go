package store_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// The repository tests (<table>_repo_test.go) call the repositories
// directly, without HTTP or use cases, on a database of their own. Ids are
// fixed: each test has its own database, and two databases given the same
// calls must hold the same rows (TestPlacementPipelinedAndStepwiseWriteTheSameRows).
var (
	staffID    = uuid.MustParse("00000000-0000-7000-8000-000000000001")
	customerID = uuid.MustParse("00000000-0000-7000-8000-000000000002")
	mugID      = uuid.MustParse("00000000-0000-7000-8000-0000000000a1")
	plateID    = uuid.MustParse("00000000-0000-7000-8000-0000000000a2")
	orderID    = uuid.MustParse("00000000-0000-7000-8000-0000000000b1")
)

// The fixtures of setup.
const (
	creditLimit  = 10_000
	mugPrice     = 500
	platePrice   = 700
	initialStock = 10
)

// repoBundle is what a repository test works with: a fresh database, the
// runner on it, and a staff member, a customer (credit limit 10,000 cents)
// and two products (a mug at 500 cents and a plate at 700, 10 of each in
// stock), all made through the repositories.
type repoBundle struct {
	t      testing.TB
	ctx    context.Context
	pool   *postgres.Pool
	runner *store.Runner
	// repos run each statement on its own, outside a transaction.
	repos app.Repositories
}

func setup(t testing.TB) *repoBundle {
	t.Helper()
	pool := testkit.GuardedPool(t)
	b := &repoBundle{
		t: t, ctx: context.Background(), pool: pool,
		runner: store.NewRunner(pool, testkit.Logger(t), nil, store.RetryPolicy{}, store.KeyConfig{
			TTL: time.Hour, Wait: 3 * time.Second, LockTimeout: 3 * time.Second,
		}),
	}
	b.repos = b.runner.WithoutTx(nil)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		for _, a := range []domain.Actor{
			{ID: staffID, Name: "Staff", Role: domain.RoleStaff},
			{ID: customerID, Name: "Customer", Role: domain.RoleCustomer, CreditLimitCents: creditLimit},
		} {
			hash := sha256.Sum256([]byte(a.ID.String()))
			if _, err := repos.Actors().Insert(ctx, a, hash[:]); err != nil {
				return err
			}
		}
		for _, p := range []struct {
			id    uuid.UUID
			sku   string
			price int64
		}{{mugID, "MUG", mugPrice}, {plateID, "PLATE", platePrice}} {
			product, stock, err := domain.NewProduct(p.id, p.sku, p.sku, p.price, initialStock)
			if err != nil {
				return err
			}
			if _, err := repos.Products().Insert(ctx, product); err != nil {
				return err
			}
			if _, err := repos.Stock().Insert(ctx, stock); err != nil {
				return err
			}
		}
		return nil
	})
	return b
}

// inTx runs fn in one transaction and fails the test on its error.
func (b *repoBundle) inTx(fn func(ctx context.Context, repos app.Repositories) error) {
	b.t.Helper()
	if err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, fn); err != nil {
		b.t.Fatal(err)
	}
}

// queryInt returns one integer from the test's database.
func (b *repoBundle) queryInt(sql string, args ...any) int {
	b.t.Helper()
	return testkit.QueryInt(b.t, b.pool, sql, args...)
}

// newOrder builds a placed order of the customer from (product, price,
// quantity) lines.
func newOrder(t testing.TB, id uuid.UUID, lines ...domain.OrderLine) *domain.Order {
	t.Helper()
	o, err := domain.PlaceOrder(id, customerID, lines)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func line(product uuid.UUID, price domain.Cents, qty domain.Quantity) domain.OrderLine {
	return domain.OrderLine{ProductID: product, UnitPrice: price, Quantity: qty}
}
