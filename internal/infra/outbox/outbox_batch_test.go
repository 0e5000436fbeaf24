package outbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestBatchMarkIsFencedByClaim: a dispatcher's POSTs are held by the
// receiver until its claim has expired, the reaper has given the events
// back, and another dispatcher has claimed them. When the receiver then
// accepts the stale dispatcher's POSTs, its one batch mark, guarded by its
// claim, records nothing: the events stay with their new owner, who
// delivers and marks them. A mark by id alone (no claimed_at fence) is
// shown to mark the new owner's events delivered while it still holds
// them, so that a failure of the new owner's delivery would be lost.
func TestBatchMarkIsFencedByClaim(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, unfenced bool) (stolen int) {
		pool := testkit.GuardedPool(t)
		const n = 5
		seedEvents(t, pool, n, `{}`)
		hold := make(chan struct{})
		var arrived atomic.Int32
		rcv := newReceiver(t, always(http.StatusOK))
		stale := outbox.NewDispatcher(pool, testkit.Logger(t), nil, outbox.OutboxConfig{
			WebhookURL: holdingURL(t, rcv, hold, &arrived), BatchSize: n, Concurrency: n,
			HTTPTimeout: 30 * time.Second, ClaimTimeout: time.Minute,
		})
		if unfenced {
			outbox.UnfenceMark(stale)
		}
		ctx := context.Background()
		c1, err := stale.Claim(ctx)
		if err != nil || len(c1.Events) != n {
			t.Fatalf("claim: %d events, %v", len(c1.Events), err)
		}
		done := make(chan error, 1)
		go func() { done <- stale.Deliver(ctx, c1) }()
		testkit.WaitFor(t, 10*time.Second, "the stale dispatcher's POSTs in flight", func() bool { return arrived.Load() == n })

		// The claim expires under a dispatcher with a short claim timeout,
		// whose reaper gives the events back; a new owner claims them. The
		// owner's own timeouts are long, so that its delivery cannot fail
		// for slowness on a busy machine.
		reaper := outbox.NewDispatcher(pool, testkit.Logger(t), nil, outbox.OutboxConfig{
			WebhookURL: rcv.srv.URL, BatchSize: n, HTTPTimeout: 50 * time.Millisecond, ClaimTimeout: 100 * time.Millisecond,
		})
		owner := outbox.NewDispatcher(pool, testkit.Logger(t), nil, outbox.OutboxConfig{
			WebhookURL: rcv.srv.URL, BatchSize: n, HTTPTimeout: 30 * time.Second, ClaimTimeout: time.Minute,
		})
		reaped := 0
		testkit.WaitFor(t, 10*time.Second, "the reaper to give the events back", func() bool {
			r, err := reaper.Reap(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reaped += r
			return reaped == n
		})
		c2, err := owner.Claim(ctx)
		if err != nil || len(c2.Events) != n {
			t.Fatalf("second claim: %d events, %v", len(c2.Events), err)
		}

		close(hold) // the receiver accepts the stale POSTs; the stale dispatcher marks its batch
		if err := <-done; err != nil {
			t.Fatalf("stale deliver: %v", err)
		}
		st := testkit.OutboxStates(t, pool)
		t.Logf("after the stale dispatcher's batch mark: %v", st)
		if err := owner.Deliver(ctx, c2); err != nil {
			t.Fatalf("owner's deliver: %v", err)
		}
		if after := testkit.OutboxStates(t, pool); after["delivered"] != n {
			t.Errorf("after the owner delivered its claim: %v", after)
		}
		return st["delivered"]
	}
	t.Run("fenced by claimed_at", func(t *testing.T) {
		t.Parallel()
		if stolen := run(t, false); stolen != 0 {
			t.Errorf("the stale dispatcher marked %d events delivered that another dispatcher had claimed", stolen)
		}
	})
	t.Run("unfenced mark is caught", func(t *testing.T) {
		t.Parallel()
		stolen := run(t, true)
		if stolen == 0 {
			t.Fatal("the unfenced mark left the re-claimed events alone: the test cannot tell the fence from its absence")
		}
		t.Logf("naive variant broke the fence as expected: %d re-claimed events marked delivered by the stale dispatcher", stolen)
	})
}

// holdingURL serves rcv's answers, but only once hold is closed; arrived
// counts the requests that came in.
func holdingURL(t *testing.T, rcv *receiver, hold <-chan struct{}, arrived *atomic.Int32) string {
	t.Helper()
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-hold
		rcv.serve(w, r)
	}))
	return srv.URL
}

// TestDeliveryConcurrencyIsBounded: with OUTBOX_CONCURRENCY 4, the receiver
// holds each request at a gate until four are in flight, and records the
// most it ever saw at once: exactly 4, so the batch is delivered
// concurrently and never beyond the bound (a fifth request would be counted
// on arrival). A dispatcher with one delivery goroutine per event of the
// batch (no bound), whose receiver's gate waits for five, is shown to
// exceed it.
func TestDeliveryConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	const bound, events = 4, 40
	run := func(t *testing.T, concurrency, cohort int) (peak int32) {
		pool := testkit.GuardedPool(t)
		seedEvents(t, pool, events, `{}`)
		rcv := newReceiver(t, always(http.StatusNoContent))
		gate := newCohort(cohort, 10*time.Second)
		var inFlight, most atomic.Int32
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := inFlight.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			gate.Wait()
			rcv.serve(w, r)
			inFlight.Add(-1)
		}))
		d := outbox.NewDispatcher(pool, testkit.Logger(t), nil, outbox.OutboxConfig{
			WebhookURL: srv.URL, BatchSize: events, Concurrency: concurrency, HTTPTimeout: 10 * time.Second,
		})
		if n, err := d.DispatchOnce(context.Background()); err != nil || n != events {
			t.Fatalf("dispatch: %d, %v", n, err)
		}
		if st := testkit.OutboxStates(t, pool); st["delivered"] != events {
			t.Errorf("states after one batch: %v", st)
		}
		acked, dup, _ := rcv.counts()
		if acked != events || dup != 0 {
			t.Errorf("%d acknowledged, %d duplicated", acked, dup)
		}
		t.Logf("concurrency %d: at most %d deliveries in flight for a batch of %d", concurrency, most.Load(), events)
		return most.Load()
	}
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		if peak := run(t, bound, bound); peak != bound {
			t.Errorf("at most %d deliveries in flight, want exactly %d", peak, bound)
		}
	})
	t.Run("unbounded is caught", func(t *testing.T) {
		t.Parallel()
		peak := run(t, events, bound+1)
		if peak <= bound {
			t.Fatalf("one goroutine per event kept to %d in flight: the test cannot tell a bound from none", peak)
		}
		t.Logf("naive variant exceeded the bound as expected: %d in flight", peak)
	})
}

// newServer is an httptest server closed at the end of the test.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// cohort holds callers of wait until n of them have arrived, then lets that
// group go together; a group that stays short is let go after timeout.
type cohort struct {
	n       int
	timeout time.Duration
	mu      sync.Mutex
	waiting int
	release chan struct{}
}

func newCohort(n int, timeout time.Duration) *cohort {
	return &cohort{n: n, timeout: timeout, release: make(chan struct{})}
}

func (g *cohort) Wait() {
	g.mu.Lock()
	ch := g.release
	g.waiting++
	if g.waiting == g.n {
		g.waiting, g.release = 0, make(chan struct{})
		close(ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(g.timeout):
		g.mu.Lock()
		if g.release == ch {
			g.waiting, g.release = 0, make(chan struct{})
			close(ch)
		}
		g.mu.Unlock()
	}
}
