package testkit

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// GuardedPool opens a pool on a fresh database (DB), with the service's
// guards, closed when the test ends.
func GuardedPool(t testing.TB) *postgres.Pool {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: DB(t), MaxConns: 16,
		StatementTimeout: 15 * time.Second, LockTimeout: 3 * time.Second, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// QueryInt returns one integer that sql reads from pool's database.
func QueryInt(t testing.TB, pool *postgres.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// WaitFor polls cond every 10 ms and fails the test when it is still false
// after limit.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// OutboxStates counts the outbox events of pool's database by state.
func OutboxStates(t testing.TB, pool *postgres.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state, count(*) FROM outbox_events GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// Migrator opens the service's migrations (goose) on the database of url,
// straight to PostgreSQL (Direct), for a test that moves a schema down and
// up; the *sql.DB it runs on is returned too and closed when the test ends.
func Migrator(t testing.TB, url string) (*sql.DB, *goose.Provider) {
	t.Helper()
	cfg, err := pgx.ParseConfig(Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { sqlDB.Close() })
	migrator, err := postgres.NewMigrator(sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	return sqlDB, migrator
}
