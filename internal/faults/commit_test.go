package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// commitFault places an order through a proxy that cuts the service's
// connection to PostgreSQL at the placement's COMMIT, as cut says, then
// retries the same request with the same key, as a client must after a 5xx.
//
// The service cannot know whether a COMMIT whose answer never came was
// executed, so it answers neither success nor a refusal: 503 `unavailable`
// with Retry-After (the connection error is app.ErrUnavailable, and every 503
// carries Retry-After). The idempotency record is written in the same
// transaction as the order and goes out with the COMMIT, so the retry is safe
// either way: if the commit happened it finds the record and replays the
// 201, if it did not it finds nothing and places the order once (seed: "a
// retry after an ambiguous commit failure may run twice"; here it cannot).
// The test reports and checks the figures: the first answer, whether the
// order was committed before the retry, and after the retry exactly one
// order, one stock decrement, one order.placed event and one key record. It
// returns what broke; keys, when set, replaces the key store (a naive
// variant).
func commitFault(t *testing.T, cut testkit.Cut, wantCommitted bool, keys app.KeyStore) []string {
	url := testkit.DB(t)
	proxy := testkit.NewProxy(t, testkit.HostPort(t, url))
	opts := testkit.Options{DatabaseURL: proxy.Via(url)}
	if keys != nil {
		opts.Wrap = func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Keys: func(app.Repositories) app.KeyStore { return keys }}
		}
	}
	e := httpkit.New(t, opts)
	if keys == nil {
		e.CheckAtEnd() // the guarded runs leave every balance equal to its orders
	}
	customer := e.NewCustomer(1_000_000)
	const stock, qty = 100, 3
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: stock})
	body := orderBody(product, qty)
	place := func() *httpkit.Response {
		return e.Do("POST", "/v1/orders", customer.Token, body, "Idempotency-Key", "ambiguous-1")
	}

	cutDone := proxy.CutAtCommit(cut)
	first := place()
	select {
	case <-cutDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy never saw the placement's COMMIT")
	}
	orders := func() int64 { return e.QueryInt(`SELECT count(*) FROM orders WHERE customer_id = $1`, customer.ID) }
	committed := orders()
	t.Logf("first attempt: %d %s, Retry-After %q; orders committed before the retry: %d", first.Status, first.Code(), first.Header.Get("Retry-After"), committed)
	if first.Status != http.StatusServiceUnavailable || first.Code() != "unavailable" {
		t.Fatalf("first attempt: %d %s, want 503 unavailable", first.Status, first.Body)
	}
	if ra, err := strconv.Atoi(first.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want a positive number of seconds", first.Header.Get("Retry-After"))
	}
	if (committed == 1) != wantCommitted || committed > 1 {
		t.Fatalf("%d orders committed by the cut attempt; the fault did not happen where the test puts it", committed)
	}

	var broken []string
	retry := place()
	if retry.Status != http.StatusCreated {
		t.Fatalf("retry: %d %s, want 201", retry.Status, retry.Body)
	}
	replayed := retry.Header.Get("Idempotent-Replayed") == "true"
	if replayed != wantCommitted {
		broken = append(broken, fmt.Sprintf("retry replayed = %v, want %v: a committed order replays, a rolled-back one is placed", replayed, wantCommitted))
	}
	p := e.Do("GET", "/v1/products/"+product+"/stock", customer.Token, nil)
	taken := stock - p.Int("stock")
	n, events := orders(), e.QueryInt(`SELECT count(*) FROM outbox_events WHERE type = 'order.placed' AND payload->>'customer_id' = $1`, customer.ID)
	records := e.QueryInt(`SELECT count(*) FROM idempotency_keys WHERE actor_id = $1`, customer.ID)
	t.Logf("retry: %d (replayed %v); orders %d, units taken %d (one order of %d), order.placed events %d, key records %d",
		retry.Status, replayed, n, taken, qty, events, records)
	if n != 1 || taken != qty || events != 1 {
		broken = append(broken, fmt.Sprintf("after the retry: %d orders, %d units taken, %d events; want 1, %d, 1", n, taken, events, qty))
	}
	if keys == nil && records != 1 {
		broken = append(broken, fmt.Sprintf("%d key records, want 1", records))
	}
	return broken
}

// commitFaultTest runs commitFault against the service and against a naive
// key store, which must be caught.
func commitFaultTest(t *testing.T, cut testkit.Cut, wantCommitted bool, naive app.KeyStore, naiveName string) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range commitFault(t, cut, wantCommitted, nil) {
			t.Error(b)
		}
	})
	t.Run("naive "+naiveName+" is caught", func(t *testing.T) {
		t.Parallel()
		broken := commitFault(t, cut, wantCommitted, naive)
		if len(broken) == 0 {
			t.Fatal("the naive key store kept one order per key: the test cannot tell")
		}
		t.Logf("naive variant caught, as it must be: %v", broken)
	})
}

// forgetfulKeys stores no record (what BENCH_DISABLE_IDEMPOTENCY does):
// every retry runs again.
type forgetfulKeys struct{}

func (forgetfulKeys) Claim(context.Context, app.Key) (*app.Receipt, error) { return nil, nil }
func (forgetfulKeys) Complete(context.Context, app.Key, app.Receipt) error { return nil }

// keysBesideTheTransaction keeps its records outside the database
// transaction of the request (here in memory, as a cache or another
// connection would): a record is kept as soon as Complete is called, whether
// or not the transaction then commits.
type keysBesideTheTransaction struct {
	mu   sync.Mutex
	kept map[app.Key]app.Receipt
}

func (k *keysBesideTheTransaction) Claim(_ context.Context, key app.Key) (*app.Receipt, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.kept[key]; ok {
		return &r, nil
	}
	return nil, nil
}

func (k *keysBesideTheTransaction) Complete(_ context.Context, key app.Key, r app.Receipt) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kept == nil {
		k.kept = map[app.Key]app.Receipt{}
	}
	k.kept[key] = r
	return nil
}

// TestCommitAnswerLostRetryYieldsOneOrder: the proxy forwards the COMMIT,
// lets the server execute it and drops its answer, closing the connection:
// the order is committed but the service cannot know. The client gets 503
// unavailable with Retry-After; its retry with the same key replays the
// committed order. Naive variant: a service that keeps no idempotency record
// places the order a second time.
func TestCommitAnswerLostRetryYieldsOneOrder(t *testing.T) {
	commitFaultTest(t, testkit.AfterCommit, true, forgetfulKeys{}, "that keeps no record")
}

// TestCommitNeverSentRetryYieldsOneOrder: the proxy closes the connection
// just before the COMMIT, after the placement's other statements went out:
// the server rolls the transaction back. The client gets the same 503; its
// retry with the same key places the order once. Naive variant: a key
// record kept outside the transaction survives the rollback, and the retry
// replays a 201 for an order that does not exist.
func TestCommitNeverSentRetryYieldsOneOrder(t *testing.T) {
	commitFaultTest(t, testkit.BeforeCommit, false, &keysBesideTheTransaction{}, "with records kept outside the transaction")
}
