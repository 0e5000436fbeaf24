package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
)

// gauge reads the latch's waiters gauge.
func gauge(t *testing.T, l *keyLatch) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.waiters)
	families, err := reg.Gather()
	if err != nil || len(families) != 1 {
		t.Fatalf("gather the gauge: %v", err)
	}
	return families[0].GetMetric()[0].GetGauge().GetValue()
}

// TestKeyLatchOneHolderPerKey: requests with one key hold the latch one at a
// time, in turn; a request with another key (another actor, operation or
// value) never waits for them; the gauge counts the waiters and ends at 0.
func TestKeyLatchOneHolderPerKey(t *testing.T) {
	l := newKeyLatch(prometheus.NewRegistry())
	k := app.Key{ActorID: uuid.New(), Operation: "adjustStock", Value: "k"}
	ctx := context.Background()
	_, release, err := l.acquire(ctx, nil, k, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []app.Key{
		{ActorID: uuid.New(), Operation: k.Operation, Value: k.Value},
		{ActorID: k.ActorID, Operation: "placeOrder", Value: k.Value},
		{ActorID: k.ActorID, Operation: k.Operation, Value: "k2"},
	} {
		_, rel, err := l.acquire(ctx, nil, other, time.Millisecond)
		if err != nil {
			t.Fatalf("%+v waited for another key: %v", other, err)
		}
		rel()
	}
	const n = 8
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, rel, err := l.acquire(ctx, nil, k, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if v := inside.Add(1); v > most.Load() {
				most.Store(v)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			rel()
		}()
	}
	for gauge(t, l) != n {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d requests held one key at once, want 1", most.Load())
	}
	if w := gauge(t, l); w != 0 {
		t.Errorf("waiters gauge %v after everyone left, want 0", w)
	}
	if len(l.held) != 0 {
		t.Errorf("%d keys still held", len(l.held))
	}
}

// TestKeyLatchWaitIsBounded: past the wait a duplicate gets
// KeyInProgressError, a cancelled one its context's error, and both leave
// the gauge; the deadline travels in the context for the claim.
func TestKeyLatchWaitIsBounded(t *testing.T) {
	l := newKeyLatch(nil)
	k := app.Key{ActorID: uuid.New(), Operation: "adjustStock", Value: "k"}
	_, release, err := l.acquire(context.Background(), nil, k, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	start := time.Now()
	ctx, _, err := l.acquire(context.Background(), nil, k, 50*time.Millisecond)
	var busy *app.KeyInProgressError
	if !errors.As(err, &busy) || busy.RetryAfter <= 0 {
		t.Fatalf("past the wait: %v, want KeyInProgressError with Retry-After", err)
	}
	if d := keyDeadline(ctx, time.Hour); d.Before(start) || d.After(start.Add(time.Second)) {
		t.Errorf("deadline in the context %v, want the latch's (start %v + 50ms)", d, start)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.acquire(cctx, nil, k, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if w := gauge(t, l); w != 0 {
		t.Errorf("waiters gauge %v, want 0", w)
	}
}
