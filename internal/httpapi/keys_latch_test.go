package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// lockWaiters counts the statements that wait on a lock in the test's
// database, on a connection of its own (the service's pool may be full).
func lockWaiters(t *testing.T, e *httpkit.Env) func() int64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return func() int64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestKeyDuplicatesDoNotExhaustThePool: duplicates of one slow request do
// not take the replica's connections while they wait for it, so other
// requests are still served (EXT.IDEMPOTENCY.REPLAY.001 without starving the
// pool). A pool of 4; the original adjustment is held after its stock
// UPDATE with its transaction open; 8 duplicates are sent and the test
// waits until every one of them waits (in the in-process key latch, or, in
// the naive run, with the pool full of them waiting on the key's row); then
// a product read and an adjustment with another key are sent, and the
// original is released once they have answered or after 10 s (a naive
// duplicate's wait in the database ends at the 15 s statement_timeout, so
// nothing frees the pool before). Guarded: both
// answer while the original is still held, and every duplicate then replays
// it. Naive variant (no key latch: every duplicate waits in the database on
// a pooled connection): the other requests answer only after the original
// was released.
//
// Patterns and rule ids: docs/patterns.md.
func TestKeyDuplicatesDoNotExhaustThePool(t *testing.T) {
	t.Parallel()
	const dups, conns = 8, 4
	run := func(t *testing.T, naive bool) []string {
		e := httpkit.New(t, testkit.Options{MaxConns: conns, KeyWait: 30 * time.Second, NoKeyLatch: naive})
		slow, other := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10}), e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
		send := func() *httpkit.Response { return adjust(e, e.Staff.Token, slow, 2, "slow-1") }
		stop := e.Hooks.StopFirst(testkit.After, "StockAdjust", 1)
		defer stop.Release()
		first := make(chan *httpkit.Response, 1)
		go func() { first <- send() }()
		select {
		case <-stop.Arrived():
		case <-time.After(10 * time.Second):
			t.Fatal("the original never reached its stock UPDATE")
		}
		res := make([]*httpkit.Response, dups)
		var wg sync.WaitGroup
		for i := range dups {
			wg.Add(1)
			go func() { defer wg.Done(); res[i] = send() }()
		}
		// Every duplicate waits: in the latch, or the pool is full of them.
		var latched float64
		var inDB int64
		waiters := lockWaiters(t, e)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			latched, inDB = e.Metric("ordersvc_idempotency_key_waiters"), waiters()
			if int(latched) == dups || inDB == conns-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the duplicates never all waited: %v in the latch, %d in the database", latched, inDB)
			}
		}
		t.Logf("duplicates waiting: %v in the key latch, %d on the key's row in the database; pool: %d of %d connections taken",
			latched, inDB, e.Pool.Stat().AcquiredConns(), conns)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		others := make(chan [2]*httpkit.Response, 1)
		go func() {
			read := e.DoContext(ctx, "GET", "/v1/products/"+other, e.Staff.Token, nil)
			write := adjust(e, e.Staff.Token, other, 1, "other-1")
			others <- [2]*httpkit.Response{read, write}
		}()
		var broken []string
		var got [2]*httpkit.Response
		select {
		case got = <-others:
		case <-time.After(10 * time.Second):
			broken = append(broken, "a product read and an adjustment with another key got no answer while duplicates of a held request waited")
			stop.Release()
			got = <-others
		}
		stop.Release()
		orig := <-first
		wg.Wait()
		if got[0].Status != http.StatusOK || got[1].Status != http.StatusCreated {
			broken = append(broken, fmt.Sprintf("the other requests answered %d %s and %d %s, want 200 and 201", got[0].Status, got[0].Body, got[1].Status, got[1].Body))
		}
		if orig.Status != http.StatusCreated || replayed(orig) {
			broken = append(broken, fmt.Sprintf("original answered %d %s, want a fresh 201", orig.Status, orig.Body))
		}
		for i, r := range res {
			if r.Status != http.StatusCreated || !replayed(r) || !bytes.Equal(r.Body, orig.Body) {
				broken = append(broken, fmt.Sprintf("duplicate %d answered %d (replayed %v) %s, want the original replayed", i, r.Status, replayed(r), r.Body))
			}
		}
		if s := stockOf(e, slow); s != 12 {
			broken = append(broken, fmt.Sprintf("stock %d, want 12: one +2 adjustment sent %d times", s, dups+1))
		}
		if w := e.Metric("ordersvc_idempotency_key_waiters"); w != 0 {
			broken = append(broken, fmt.Sprintf("ordersvc_idempotency_key_waiters is %v after every request answered, want 0", w))
		}
		return broken
	}
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range run(t, false) {
			t.Error(b)
		}
	})
	t.Run("naive duplicates waiting in the database are caught", func(t *testing.T) {
		t.Parallel()
		broken := run(t, true)
		if len(broken) == 0 {
			t.Fatal("the naive service kept serving: the test cannot tell waiting in memory from waiting on a connection")
		}
		t.Logf("naive variant broke the contract as expected: %v", broken)
	})
}
