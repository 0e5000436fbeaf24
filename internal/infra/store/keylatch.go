package store

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
)

// FAST PATH (docs/fast-path.md #9): duplicates of one key wait in memory.
//
// keyLatch makes the requests of this process that carry the same
// idempotency key (actor, operation, key) run one at a time, and makes the
// others wait for their turn here, in memory, instead of in the database.
//
// Without it, every duplicate of an in-flight request takes a pooled
// connection and blocks on the original's uncommitted key row for up to
// IDEMPOTENCY_WAIT: a few retries of one slow request hold the whole pool
// (4 connections on 2 cores) and every other request of the replica queues
// behind them. With it, a replica holds at most one connection per key;
// the duplicates wait without one and, once the holder has finished, go on
// one by one (each then replays the holder's record, or executes if the
// holder rolled back). Duplicates on other replicas still meet in the
// database, on the key's row, bounded by IDEMPOTENCY_WAIT.
//
// The wait here and the claim's wait in the database share one budget of
// IDEMPOTENCY_WAIT (keyDeadline): a duplicate never waits longer in all.
type keyLatch struct {
	mu      sync.Mutex
	held    map[latchKey]chan struct{} // closed when the holder leaves
	waiters prometheus.Gauge
}

type latchKey struct {
	actor     [16]byte
	operation string
	key       string
}

func newKeyLatch(reg prometheus.Registerer) *keyLatch {
	l := &keyLatch{
		held: make(map[latchKey]chan struct{}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ordersvc_idempotency_key_waiters",
			Help: "Requests waiting, without a database connection, for another request of this process that holds the same idempotency key.",
		}),
	}
	if reg != nil {
		reg.MustRegister(l.waiters)
	}
	return l
}

// keyDeadlineKey carries, in a request's context, the moment its wait for
// a key runs out.
type keyDeadlineKey struct{}

// keyDeadline is when the request's wait for its key runs out: the one its
// in-process wait started, else wait from now.
func keyDeadline(ctx context.Context, wait time.Duration) time.Time {
	if d, ok := ctx.Value(keyDeadlineKey{}).(time.Time); ok {
		return d
	}
	return time.Now().Add(wait)
}

// acquire waits until no other request of this process holds k, for at most
// wait, and then holds it. It returns the context to run the request with
// (it carries the wait's deadline, for the claim) and the release function.
// Past the wait it returns *app.KeyInProgressError: the holder is certainly
// still in flight. A request that waited has its authorization, the token
// check auth, read again (auth.Recheck) before it acts or answers.
func (l *keyLatch) acquire(ctx context.Context, auth *app.AuthCheck, k app.Key, wait time.Duration) (context.Context, func(), error) {
	deadline := time.Now().Add(wait)
	ctx = context.WithValue(ctx, keyDeadlineKey{}, deadline)
	id := latchKey{actor: k.ActorID, operation: k.Operation, key: k.Value}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for waited := false; ; waited = true {
		l.mu.Lock()
		done, busy := l.held[id]
		if !busy {
			mine := make(chan struct{})
			l.held[id] = mine
			l.mu.Unlock()
			if waited {
				auth.Recheck()
			}
			return ctx, func() { l.release(id, mine) }, nil
		}
		l.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		l.waiters.Inc()
		select {
		case <-done:
			l.waiters.Dec()
		case <-timer.C:
			l.waiters.Dec()
			auth.Recheck()
			return ctx, nil, &app.KeyInProgressError{RetryAfter: time.Second}
		case <-ctx.Done():
			l.waiters.Dec()
			return ctx, nil, ctx.Err()
		}
	}
}

func (l *keyLatch) release(id latchKey, mine chan struct{}) {
	l.mu.Lock()
	if l.held[id] == mine {
		delete(l.held, id)
	}
	l.mu.Unlock()
	close(mine)
}
