package postgres_test

import (
	"context"
	"testing"
	"time"

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
