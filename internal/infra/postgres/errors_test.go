package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestDataExceptionsAreCallerErrors: a value the domain let through but
// PostgreSQL refuses with a data exception (SQLSTATE class 22, here 22021 for
// U+0000 in text) comes out of the repository as a caller error
// (validation_failed), not as an unclassified driver error that the HTTP
// layer would answer with 500; its detail carries nothing of the driver's
// message, and nothing is written. The domain refuses such values first
// (ParseName); this is the backstop for a rule it does not know yet.
func TestDataExceptionsAreCallerErrors(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	runner := store.NewRunner(pool, testkit.Logger(t), prometheus.NewRegistry(), store.RetryPolicy{MaxAttempts: 2},
		store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: 3 * time.Second})
	// Rehydration skips validation: exactly what a missing domain rule would let through.
	p := domain.RehydrateProduct(uuid.New(), "NUL-1", "mug\x00", 100, 1, time.Now(), time.Now())
	err := runner.InTx(context.Background(), nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		_, err := tx.Products().Insert(ctx, p)
		return err
	})
	if err == nil {
		t.Fatal("PostgreSQL stored a name holding U+0000")
	}
	if code := domain.ErrorCode(err); code != domain.CodeValidation {
		t.Fatalf("error %v has code %q, want %q", err, code, domain.CodeValidation)
	}
	if !strings.Contains(err.Error(), "22021") {
		t.Errorf("the driver's error is not kept for the log: %v", err)
	}
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM products`); n != 0 {
		t.Errorf("%d products written, want 0", n)
	}
}

// TestServerSettingsRefusedAreNotCallerErrors: a guard PostgreSQL refuses
// (a lock_timeout over its 2,147,483,647 ms, SQLSTATE 22023, class 22) is
// the server's own misconfiguration, not something a caller sent: it must
// not answer validation_failed, which tells the caller to change the
// request. Configuration refuses such values at start (cmd/api); this is
// the backstop for a pool opened with one all the same. Before the guards'
// errors were told apart, every request on such a pool answered 422.
func TestServerSettingsRefusedAreNotCallerErrors(t *testing.T) {
	t.Parallel()
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: testkit.DB(t), MaxConns: 2,
		StatementTimeout: 15 * time.Second, LockTimeout: 600 * time.Hour, IdleInTxTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	runner := store.NewRunner(pool, testkit.Logger(t), prometheus.NewRegistry(), store.RetryPolicy{MaxAttempts: 2},
		store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: 3 * time.Second})
	err = runner.InTx(context.Background(), nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		_, err := tx.Products().Get(ctx, uuid.New())
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "22023") {
		t.Fatalf("a transaction with lock_timeout 600h: %v, want PostgreSQL's refusal (22023)", err)
	}
	if code := domain.ErrorCode(err); code != "" {
		t.Errorf("the server's own refused setting has the caller's code %q, want none (an internal error): the caller's request was fine", code)
	}
}
