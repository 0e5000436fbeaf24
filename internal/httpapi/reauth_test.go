package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// A deactivated actor's tokens stop working at once (docs/adr/0011): a
// request that waited, on an idempotency key or before retrying its
// transaction, reads its authorization again after the wait. These tests
// deactivate the actor while a request waits, at a forced point.

// authOnceAtStart is the naive variant: a request's authorization is read
// once, before its first wait, and never again. It settles the request's
// check with a lookup of its own when the request enters the transactor (or
// the key latch), and passes no check to anything after.
type authOnceAtStart struct {
	app.Transactor
	auth app.Authenticate
}

func naiveAuthOnce(inner app.Transactor) app.Transactor {
	return authOnceAtStart{Transactor: inner, auth: app.Authenticate{Transactor: inner}}
}

func (n authOnceAtStart) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	if err := n.auth.Confirm(ctx, auth); err != nil {
		return err
	}
	return n.Transactor.InTx(ctx, nil, iso, fn)
}

func (n authOnceAtStart) LatchKey(ctx context.Context, auth *app.AuthCheck, k app.Key) (context.Context, func(), error) {
	if err := n.auth.Confirm(ctx, auth); err != nil {
		return ctx, nil, err
	}
	if l, ok := n.Transactor.(app.KeyLatch); ok {
		return l.LatchKey(ctx, nil, k)
	}
	return ctx, func() {}, nil
}

// deactivate has staff deactivate actor id and fails unless it is done.
func deactivate(t *testing.T, e *httpkit.Env, id string) {
	t.Helper()
	if r := e.Do("POST", "/v1/actors/"+id+"/deactivate", e.Staff.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("deactivate %s: %d %s", id, r.Status, r.Body)
	}
}

// TestDeactivationRefusesRequestWaitingOnKey: a staff actor's stock
// adjustment is held after its UPDATE; a retry of it (same key) waits for
// it, in this process's key latch or, sent to a second replica on the same
// database, on the key's row; the actor is deactivated; the original is
// released. The original, in flight before the deactivation, completes; the
// retry, which waited across it, is refused with 401 and replays nothing.
// The same when the retry's wait (IDEMPOTENCY_WAIT, 8 s) runs out while the
// original is still held: 401, not 409 idempotency_in_progress. The naive
// variant reads the authorization once, before the wait, and is shown to
// replay the 201 (or answer the 409) to the deactivated actor.
func TestDeactivationRefusesRequestWaitingOnKey(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, otherReplica, pastWait, naive bool) []string {
		var wrap func(app.Transactor) app.Transactor
		if naive {
			wrap = naiveAuthOnce
		}
		keyWait := 10 * time.Second
		if pastWait {
			// The deactivation must land within the retry's wait: 8 s
			// holds a few HTTP round trips however busy the machine.
			keyWait = 8 * time.Second
		}
		e := httpkit.New(t, testkit.Options{Wrap: wrap, KeyWait: keyWait})
		dupEnv := e // the replica the retry is sent to
		if otherReplica {
			dupEnv = httpkit.New(t, testkit.Options{DatabaseURL: e.URL, Wrap: wrap, KeyWait: keyWait})
		}
		clerk := e.NewStaff()
		id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
		// Both replicas know the clerk's token (cache warm), as in steady traffic.
		for _, x := range []*httpkit.Env{e, dupEnv} {
			if r := x.Do("GET", "/v1/products/"+id, clerk.Token, nil); r.Status != http.StatusOK {
				t.Fatalf("warm-up read: %d %s", r.Status, r.Body)
			}
		}
		stop := e.Hooks.StopFirst(testkit.After, "StockAdjust", 1)
		defer stop.Release()
		first := make(chan *httpkit.Response, 1)
		go func() { first <- adjust(e, clerk.Token, id, 5, "count-9") }()
		select {
		case <-stop.Arrived():
		case <-time.After(15 * time.Second):
			t.Fatal("the original never reached its stock UPDATE")
		}
		dup := make(chan *httpkit.Response, 1)
		go func() { dup <- adjust(dupEnv, clerk.Token, id, 5, "count-9") }()
		waiters := lockWaiters(t, e)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if dupEnv.Metric("ordersvc_idempotency_key_waiters") == 1 || waiters() == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the retry never waited for the original")
			}
		}
		deactivate(t, e, clerk.ID)
		var retry *httpkit.Response
		if pastWait {
			retry = <-dup // the original is still held
		}
		stop.Release()
		orig := <-first
		if !pastWait {
			retry = <-dup
		}
		var broken []string
		if orig.Status != http.StatusCreated {
			broken = append(broken, fmt.Sprintf("the original, in flight before the deactivation, answered %d %s, want 201", orig.Status, orig.Body))
		}
		if retry.Status != http.StatusUnauthorized || retry.Code() != "unauthenticated" {
			broken = append(broken, fmt.Sprintf("the retry that waited across the deactivation answered %d (replayed %v) %s, want 401 unauthenticated",
				retry.Status, replayed(retry), retry.Body))
		}
		if s := stockOf(e, id); s != 15 {
			broken = append(broken, fmt.Sprintf("stock %d, want 15", s))
		}
		return broken
	}
	for _, c := range []struct {
		name        string
		other, past bool
	}{
		{"in the key latch", false, false},
		{"on another replica, in the database", true, false},
		{"in the key latch, past the wait", false, true},
		{"on another replica, in the database, past the wait", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Run("guarded", func(t *testing.T) {
				t.Parallel()
				for _, b := range run(t, c.other, c.past, false) {
					t.Error(b)
				}
			})
			t.Run("naive authorization read once is caught", func(t *testing.T) {
				t.Parallel()
				broken := run(t, c.other, c.past, true)
				if len(broken) == 0 {
					t.Fatal("the naive service refused the retry: the test cannot tell a re-read authorization from one read once")
				}
				t.Logf("naive variant broke the contract as expected: %v", broken)
			})
		})
	}
}

// TestDeactivationRefusesRetryAfterSerializationFailure: staff actor A
// deactivates staff actor X (SERIALIZABLE). A's transaction is held after
// counting the other active staff; meanwhile the main staff actor
// deactivates A, which reads X and writes A, so A's transaction fails with
// a serialization failure (40001) once released, and the runner runs it
// again. That attempt comes after A's deactivation and is refused: 401, X
// stays active. The naive variant reads the authorization once, before the
// first attempt, and is shown to let the deactivated A deactivate X.
func TestDeactivationRefusesRetryAfterSerializationFailure(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, naive bool) []string {
		var wrap func(app.Transactor) app.Transactor
		if naive {
			wrap = naiveAuthOnce
		}
		e := httpkit.New(t, testkit.Options{Wrap: wrap})
		a, x := e.NewStaff(), e.NewStaff()
		stop := e.Hooks.StopFirst(testkit.After, "ActorCountOtherActiveStaff", 1)
		defer stop.Release()
		res := make(chan *httpkit.Response, 1)
		go func() { res <- e.Do("POST", "/v1/actors/"+x.ID+"/deactivate", a.Token, nil) }()
		select {
		case <-stop.Arrived():
		case <-time.After(15 * time.Second):
			t.Fatal("A's deactivation never counted the staff")
		}
		deactivate(t, e, a.ID)
		stop.Release()
		r := <-res
		retries := e.Metric("ordersvc_tx_retries_total", "sqlstate", "40001")
		t.Logf("A's request answered %d after %v serialization retries", r.Status, retries)
		var broken []string
		if retries < 1 {
			t.Errorf("no serialization failure was retried: the interleaving was not reached")
		}
		if r.Status != http.StatusUnauthorized || r.Code() != "unauthenticated" {
			broken = append(broken, fmt.Sprintf("the deactivated actor's retried request answered %d %s, want 401 unauthenticated", r.Status, r.Body))
		}
		if active := e.QueryInt(`SELECT count(*) FROM actors WHERE id = $1 AND active`, x.ID); active != 1 {
			broken = append(broken, "X was deactivated by an actor deactivated before the attempt that did it")
		}
		return broken
	}
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range run(t, false) {
			t.Error(b)
		}
	})
	t.Run("naive authorization read once is caught", func(t *testing.T) {
		t.Parallel()
		broken := run(t, true)
		if len(broken) == 0 {
			t.Fatal("the naive service refused the retry: the test cannot tell a re-read authorization from one read once")
		}
		t.Logf("naive variant broke the contract as expected: %v", broken)
	})
}
