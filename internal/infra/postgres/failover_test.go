package postgres_test

import (
	"context"
	"errors"
	"fmt"
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

// failoverRunner is a runner on url with a short statement_timeout, so that
// a COMMIT waiting for a synchronous standby is cancelled soon, as the
// service's DB_STATEMENT_TIMEOUT cancels it in production.
func failoverRunner(t *testing.T, url string, statementTimeout time.Duration) (*store.Runner, *postgres.Pool) {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: url, MaxConns: 4,
		StatementTimeout: statementTimeout, LockTimeout: 3 * time.Second, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	runner := store.NewRunner(pool, testkit.Logger(t), prometheus.NewRegistry(), store.RetryPolicy{MaxAttempts: 2},
		store.KeyConfig{TTL: time.Hour, Wait: time.Second, LockTimeout: 3 * time.Second})
	return runner, pool
}

// insertProduct is one acknowledged write when it returns nil. Its 3 s
// deadline stands for the service's REQUEST_TIMEOUT.
func insertProduct(runner *store.Runner, sku string) error {
	p := domain.RehydrateProduct(uuid.New(), domain.SKU(sku), "failover mug", 100, 1, time.Now(), time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		_, err := tx.Products().Insert(ctx, p)
		return err
	})
}

// TestFailoverLosesNoAcknowledgedWrite forces the failover that loses data:
// the standby stops receiving WAL (its WAL receiver held back), the primary
// acknowledges what it can, dies, and the standby is promoted. Every write
// the runner acknowledged must be on the new primary.
//
// With synchronous replication the primary's COMMIT waits for the standby.
// The first held write waits until its deadline (REQUEST_TIMEOUT): the
// connection is cut and the outcome is ambiguous (503). The others have their
// wait cancelled by pg_cancel_backend, as an operator or a monitoring job
// might; PostgreSQL then reports the COMMIT as a success with a warning
// (committed locally, maybe not replicated), and the runner answers it as
// ambiguous too (app.ErrUnavailable: 503, retry with the same key). Two naive
// variants must lose an acknowledged write: asynchronous replication, and
// synchronous replication taking the warning's COMMIT as a success.
func TestFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	scenario := func(t *testing.T, sync, trustCancelled bool) []string {
		rep := testkit.StartReplication(t, sync)
		runner, pool := failoverRunner(t, rep.MultiHostURL(), time.Second)
		if trustCancelled {
			postgres.TrustCancelledSyncCommits(pool)
		}
		if err := insertProduct(runner, "BEFORE-HOLD"); err != nil {
			t.Fatalf("write before the standby is held back: %v", err)
		}
		rep.Standby.WaitFor("SELECT count(*) FROM products", 1)
		rep.HoldStandby()
		var acknowledged []string
		for i := range 3 {
			sku := fmt.Sprintf("HELD-%d", i)
			stop := make(chan struct{})
			if sync && i > 0 {
				go cancelSyncRepWaits(rep.Primary, stop)
			}
			err := insertProduct(runner, sku)
			close(stop)
			switch {
			case err == nil:
				acknowledged = append(acknowledged, sku)
			case errors.Is(err, app.ErrUnavailable):
				t.Logf("%s: ambiguous, answered 503: %v", sku, err)
			default:
				t.Fatalf("%s: %v (want success or app.ErrUnavailable)", sku, err)
			}
		}
		rep.Primary.Stop()
		rep.Standby.Promote()
		var lost []string
		for _, sku := range append([]string{"BEFORE-HOLD"}, acknowledged...) {
			if rep.Standby.Int("SELECT count(*) FROM products WHERE sku = $1", sku) != 1 {
				lost = append(lost, "acknowledged write "+sku+" is not on the promoted standby")
			}
		}
		t.Logf("sync=%v: %d of 3 held writes acknowledged, %d acknowledged writes lost", sync, len(acknowledged), len(lost))
		return lost
	}
	t.Run("guarded: synchronous replication, cancelled waits ambiguous", func(t *testing.T) {
		t.Parallel()
		for _, b := range scenario(t, true, false) {
			t.Error(b)
		}
	})
	for _, naive := range []struct {
		name          string
		sync, trusted bool
	}{
		{"naive variant is caught: asynchronous replication", false, false},
		{"naive variant is caught: cancelled sync waits taken as commits", true, true},
	} {
		t.Run(naive.name, func(t *testing.T) {
			t.Parallel()
			lost := scenario(t, naive.sync, naive.trusted)
			if len(lost) == 0 {
				t.Fatal("the naive variant lost no acknowledged write: this test cannot catch the loss")
			}
			t.Logf("naive variant lost acknowledged writes, as it must: %v", lost)
		})
	}
}

// cancelSyncRepWaits cancels, until stop closes, every backend of node that
// waits for a synchronous standby.
func cancelSyncRepWaits(node *testkit.Node, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		_, _ = node.TryInt("SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	}
}

// TestReadOnlyNodeWritesAreUnavailableAndLeaveThePool: the primary is
// fenced read-only (default_transaction_read_only, as operators fence an old
// primary) and the standby promoted, with a multi-host DATABASE_URL and
// target_session_attrs=read-write. The pooled connection still leads to the
// old primary: the first write there is refused with 25006 and must come
// back as app.ErrUnavailable (503, never a 500), and the connection must
// leave the pool, so that a retry dials again and lands on the new primary.
// The naive variant keeps the connection and every retry fails.
func TestReadOnlyNodeWritesAreUnavailableAndLeaveThePool(t *testing.T) {
	t.Parallel()
	scenario := func(t *testing.T, naive bool) []string {
		rep := testkit.StartReplication(t, false)
		runner, _ := failoverRunner(t, rep.MultiHostURL(), 10*time.Second)
		if naive {
			postgres.KeepReadOnlyConns(runner.Tx())
		}
		if err := insertProduct(runner, "ON-PRIMARY"); err != nil {
			t.Fatalf("write on the primary: %v", err)
		}
		rep.Standby.WaitFor("SELECT count(*) FROM products", 1)
		rep.Primary.Exec("ALTER SYSTEM SET default_transaction_read_only = on")
		rep.Primary.Exec("SELECT pg_reload_conf()")
		rep.Primary.WaitFor("SELECT CASE WHEN current_setting('default_transaction_read_only') = 'on' THEN 1 ELSE 0 END", 1)
		rep.Standby.Promote()
		var broken []string
		err := insertProduct(runner, "AFTER-FENCE")
		if err == nil {
			return []string{"the first write after the fence succeeded: the pooled connection did not lead to the fenced primary"}
		}
		if !errors.Is(err, app.ErrUnavailable) {
			return []string{fmt.Sprintf("a write refused as read-only is %v, not app.ErrUnavailable (it would be a 500)", err)}
		}
		for attempt := 1; ; attempt++ {
			err = insertProduct(runner, "AFTER-FENCE")
			if err == nil {
				t.Logf("retry %d reached the new primary", attempt)
				break
			}
			if attempt == 5 {
				broken = append(broken, fmt.Sprintf("5 retries after a read-only refusal still fail: %v", err))
				break
			}
		}
		return broken
	}
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range scenario(t, false) {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		broken := scenario(t, true)
		if len(broken) == 0 {
			t.Fatal("the naive variant reached the new primary: this test cannot catch a kept read-only connection")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
	})
}
