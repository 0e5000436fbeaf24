package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// newPool opens a pool on a fresh database, with the service's guards.
func newPool(t testing.TB) *postgres.Pool {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: testkit.DB(t), MaxConns: 16,
		StatementTimeout: 15 * time.Second, LockTimeout: 3 * time.Second, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func queryInt(t testing.TB, pool *postgres.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// metric returns the value of a counter or gauge (summed over its labels
// that match the given name=value pairs).
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return testkit.Metric(t, reg, name, labels...)
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
