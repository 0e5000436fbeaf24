package infra_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra"
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
	pool := newPool(t)
	runner := infra.NewRunner(pool, testkit.Logger(t), prometheus.NewRegistry(), infra.RetryPolicy{MaxAttempts: 2},
		infra.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: 3 * time.Second})
	// Rehydration skips validation: exactly what a missing domain rule would let through.
	p := domain.RehydrateProduct(uuid.New(), "NUL-1", "mug\x00", 100, 1, time.Now(), time.Now())
	err := runner.InTx(context.Background(), app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
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
	if n := queryInt(t, pool, `SELECT count(*) FROM products`); n != 0 {
		t.Errorf("%d products written, want 0", n)
	}
}
