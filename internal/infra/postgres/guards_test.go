package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// The guard timeouts (seed: "Set guards") are set per transaction, in front
// of its first statement, so that they hold behind PgBouncer in transaction
// mode too, where connection settings are refused or leak. With
// TEST_PGBOUNCER=1 every test here runs through PgBouncer.

// guardedRunner opens a pool with short guards on a fresh database.
func guardedRunner(t *testing.T, statement, lock, idle time.Duration) (*store.Runner, *postgres.Pool) {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: testkit.DB(t), MaxConns: 4,
		StatementTimeout: statement, LockTimeout: lock, IdleInTxTimeout: idle,
		ConnectTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	runner := store.NewRunner(pool, testkit.Logger(t), prometheus.NewRegistry(), store.RetryPolicy{},
		store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: lock})
	return runner, pool
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func TestGuardsCancelALongStatement(t *testing.T) {
	t.Parallel()
	runner, guarded := guardedRunner(t, 300*time.Millisecond, 5*time.Second, 10*time.Second)
	ctx := context.Background()
	const long = `SELECT pg_sleep(1.5)`

	// Naive variant: the same runner on a pool whose connections carry no
	// guard (the settings sent at connect are gone behind a transaction
	// pooler): the statement runs to its end.
	unguarded, err := pgxpool.New(ctx, guarded.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer unguarded.Close()
	naive := store.NewRunner(postgres.Wrap(unguarded), testkit.Logger(t), nil, store.RetryPolicy{}, store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: time.Second})
	start := time.Now()
	err = naive.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		_, err := testkit.Conn(tx).Exec(ctx, long)
		return err
	})
	if err != nil || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("naive variant: %v after %s, want the statement to run its 1.5 s", err, time.Since(start))
	}
	t.Logf("naive variant (no guards): the statement ran its %s", time.Since(start).Round(time.Millisecond))

	for _, c := range []struct {
		name string
		run  func(func(app.Repositories) error) error
	}{
		{"in a transaction", func(f func(app.Repositories) error) error {
			return runner.InTx(ctx, nil, app.ReadCommitted, func(_ context.Context, tx app.Repositories) error { return f(tx) })
		}},
		{"a read outside any transaction", func(f func(app.Repositories) error) error { return f(runner.WithoutTx(nil)) }},
	} {
		start := time.Now()
		err := c.run(func(tx app.Repositories) error {
			_, err := testkit.Conn(tx).Exec(ctx, long)
			return err
		})
		took := time.Since(start)
		// Nothing else cancels it (no deadline on ctx): 57014 with this
		// message is the statement_timeout, whatever the machine's speed.
		if sqlstate(err) != "57014" || !strings.Contains(err.Error(), "statement timeout") {
			t.Fatalf("%s: a 1.5 s statement under a 300 ms statement_timeout ended with %v after %s, want SQLSTATE 57014 (statement timeout)", c.name, err, took)
		}
		t.Logf("%s: cancelled after %s (%v)", c.name, took.Round(time.Millisecond), err)
	}
}

func TestGuardsAreInForceInEveryTransactionAndLeakNowhere(t *testing.T) {
	t.Parallel()
	runner, pool := guardedRunner(t, 7*time.Second, 3*time.Second, 11*time.Second)
	ctx := context.Background()
	want := "7s 3s 11s force_generic_plan"
	show := `SELECT current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || ' ' ||
	         current_setting('idle_in_transaction_session_timeout') || ' ' || current_setting('plan_cache_mode')`
	for i := range 20 {
		var got string
		err := runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
			return testkit.Conn(tx).QueryRow(ctx, show).Scan(&got)
		})
		if err != nil || got != want {
			t.Fatalf("transaction %d: guards %q (%v), want %q", i, got, err, want)
		}
		if err := testkit.Conn(runner.WithoutTx(nil)).QueryRow(ctx, show).Scan(&got); err != nil || got != want {
			t.Fatalf("read %d: guards %q (%v), want %q", i, got, err, want)
		}
	}
	// A plain client of the same database (through the same PgBouncer,
	// when the tests use one) sees the server's defaults: the guards ended
	// with their transactions.
	plain, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	for i := range 20 {
		var got string
		if err := plain.QueryRow(ctx, show).Scan(&got); err != nil || got != "0 0 0 auto" {
			t.Fatalf("plain client %d: settings %q (%v), want the defaults 0 0 0 auto", i, got, err)
		}
	}
}

func TestGuardsEndATransactionLeftIdle(t *testing.T) {
	t.Parallel()
	runner, pool := guardedRunner(t, 5*time.Second, 2*time.Second, 300*time.Millisecond)
	ctx := context.Background()
	err := runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		var pid int
		if err := testkit.Conn(tx).QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		// The transaction sits idle until its server process is gone:
		// idle_in_transaction_session_timeout ends it after 300 ms, however
		// long the machine then takes to get there. Without the guard it
		// would stay, and the test gives up after 30 s.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var alive bool
			if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
				return err
			}
			if !alive {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a transaction idle for 30 s under a 300 ms idle_in_transaction_session_timeout is still open")
			}
		}
		_, err := testkit.Conn(tx).Exec(ctx, `SELECT 1`)
		return err
	})
	if err == nil {
		t.Fatal("a transaction whose session the idle timeout ended went on")
	}
	t.Logf("ended with %v", err)
}

// The naive way, the guards as startup parameters (what the pool did
// before), is refused by PgBouncer in transaction mode: every connection
// fails at start.
func TestGuardsAsStartupParametersAreRefusedByPgBouncer(t *testing.T) {
	if !testkit.ThroughPgBouncer() {
		t.Log("runs with TEST_PGBOUNCER=1 (CI runs it so); nothing to compare directly")
		return
	}
	t.Parallel()
	cfg, err := pgx.ParseConfig(testkit.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["statement_timeout"] = "10000"
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		t.Fatal("PgBouncer accepted statement_timeout as a startup parameter: the naive variant was not caught")
	}
	if !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Fatalf("connect: %v, want PgBouncer's unsupported startup parameter", err)
	}
	t.Logf("naive variant refused as expected: %v", err)
}
