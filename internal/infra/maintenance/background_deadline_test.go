package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestBackgroundStatementsHaveADeadline: behind PgBouncer, a statement
// sent while PostgreSQL is down waits in PgBouncer's queue
// (query_wait_timeout, 120 s) and no server-side timeout runs. Every
// background statement carries a deadline of its own: the idempotency
// purge's and the outbox retention's batches (twice DB_STATEMENT_TIMEOUT
// and a second, 2 s here), the dispatcher's claim and reaper (5 s). Each
// returns an error within the test's patience; the naive purge, with no
// deadline, is still waiting when the patience runs out.
func TestBackgroundStatementsHaveADeadline(t *testing.T) {
	t.Parallel()
	url := testkit.Direct(testkit.DB(t))
	proxy := testkit.NewProxy(t, testkit.HostPort(t, url)) // PostgreSQL, as PgBouncer sees it
	ctx := context.Background()
	log := testkit.Logger(t)
	// One PgBouncer per worker: each worker's statement is the first that
	// its PgBouncer queues after the outage (later ones may be refused at
	// once with "server login has been failing").
	poolViaOwnBouncer := func() *postgres.Pool {
		bouncer := testkit.StartPgBouncer(t, testkit.HostPort(t, proxy.Via(url)))
		pool, err := postgres.NewPool(ctx, postgres.PoolConfig{
			URL: bouncer.Via(url), MaxConns: 4, ConnectTimeout: 3 * time.Second,
			StatementTimeout: 500 * time.Millisecond, LockTimeout: 500 * time.Millisecond, IdleInTxTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	purger := maintenance.NewPurger(poolViaOwnBouncer(), log, nil, maintenance.PurgeConfig{})
	naive := maintenance.NewPurger(poolViaOwnBouncer(), log, nil, maintenance.PurgeConfig{})
	maintenance.UnboundSweeps(naive)
	retention := maintenance.NewOutboxRetention(poolViaOwnBouncer(), log, nil, maintenance.RetentionConfig{})
	claimer := outbox.NewDispatcher(poolViaOwnBouncer(), log, nil, outbox.OutboxConfig{WebhookURL: "http://127.0.0.1:1/"})
	reaper := outbox.NewDispatcher(poolViaOwnBouncer(), log, nil, outbox.OutboxConfig{WebhookURL: "http://127.0.0.1:1/"})
	work := map[string]func(context.Context) error{
		"purge":       func(ctx context.Context) error { _, err := purger.PurgeOnce(ctx); return err },
		"retention":   func(ctx context.Context) error { _, err := retention.DeleteOnce(ctx); return err },
		"claim":       func(ctx context.Context) error { _, err := claimer.Claim(ctx); return err },
		"reap":        func(ctx context.Context) error { _, err := reaper.Reap(ctx); return err },
		"naive purge": func(ctx context.Context) error { _, err := naive.PurgeOnce(ctx); return err },
	}
	for name, f := range work { // the pool's connections to PgBouncer are open
		if err := f(ctx); err != nil {
			t.Fatalf("%s before the outage: %v", name, err)
		}
	}

	proxy.Stop() // PostgreSQL is gone; PgBouncer and the pool's connections to it stay
	defer proxy.Start()
	const patience = 15 * time.Second
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]string{}
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, patience)
			defer cancel()
			start := time.Now()
			err := f(ctx)
			answer := fmt.Sprintf("%v after %s", err, time.Since(start).Round(time.Millisecond))
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				answer = "" // still waiting when the patience ran out
			}
			mu.Lock()
			answers[name] = answer
			mu.Unlock()
		})
	}
	for name, f := range work {
		run(name, f)
	}
	wg.Wait()
	for name := range work {
		if name == "naive purge" {
			continue
		}
		if answers[name] == "" {
			t.Errorf("%s: no answer within %s while PostgreSQL is down behind PgBouncer", name, patience)
		} else {
			t.Logf("%s: %s", name, answers[name])
		}
	}
	if answers["naive purge"] != "" {
		t.Errorf("naive purge answered (%s): the test cannot tell a bounded wait from an unbounded one", answers["naive purge"])
	} else {
		t.Logf("naive purge (no deadline): no answer within %s", patience)
	}
}
