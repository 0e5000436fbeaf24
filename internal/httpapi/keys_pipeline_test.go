package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// The idempotency claim runs as one batch (set the wait, claim, restore the
// lock timeout, read the holder) and the completion travels with COMMIT.
// These tests hold the key contract to that implementation.

// A storm: 16 clients send the same key at once. Exactly one executes; the
// others wait for it and replay its response byte for byte.
func TestKeyStormExecutesOnce(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 1000})
	customer := e.NewCustomer(1_000_000)
	const n = 16
	res := make([]*httpkit.Response, n)
	testkit.Race(n, func(i int) { res[i] = e.PlaceOrder(customer.Token, "storm-1", testkit.Line(product, 2)) })
	fresh := 0
	for i, r := range res {
		if r.Status != http.StatusCreated {
			t.Fatalf("client %d: %d %s", i, r.Status, r.Body)
		}
		if r.Header.Get("Idempotent-Replayed") != "true" {
			fresh++
		}
		if !bytes.Equal(r.Body, res[0].Body) || r.Header.Get("ETag") != res[0].Header.Get("ETag") ||
			r.Header.Get("Location") != res[0].Header.Get("Location") {
			t.Errorf("client %d got another response: %s %v", i, r.Body, r.Header)
		}
	}
	if fresh != 1 {
		t.Errorf("%d of %d clients executed the request, want 1", fresh, n)
	}
	if got := e.QueryInt(`SELECT count(*) FROM orders`); got != 1 {
		t.Errorf("%d orders for one key", got)
	}
	if got := stockOf(e, product); got != 998 {
		t.Errorf("stock %d, want 998", got)
	}
}

func TestKeyReusedWithAnotherRequestIs422(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 1000})
	customer := e.NewCustomer(1_000_000)
	if r := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 1)); r.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	r := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 2))
	if r.Status != http.StatusUnprocessableEntity || r.Code() != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %s", r.Status, r.Body)
	}
	if got := e.QueryInt(`SELECT count(*) FROM orders`); got != 1 {
		t.Errorf("%d orders", got)
	}
}

// A duplicate that waits longer than IDEMPOTENCY_WAIT for the in-flight
// original gets 409 idempotency_in_progress with Retry-After; the original
// then commits and a later retry replays it. The original is held before its
// COMMIT, holding its key, until the duplicate has its answer.
func TestKeyInFlightDuplicateTimesOut(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t, testkit.Options{KeyWait: 300 * time.Millisecond})
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 1000})
	customer := e.NewCustomer(1_000_000)
	stop := e.Hooks.StopFirst(testkit.Before, "commit", 1)
	first := make(chan *httpkit.Response)
	go func() { first <- e.PlaceOrder(customer.Token, "k", testkit.Line(product, 1)) }()
	stop.WaitArrived(t, 10*time.Second)
	dup := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 1))
	stop.Release()
	if dup.Status != http.StatusConflict || dup.Code() != "idempotency_in_progress" || dup.Header.Get("Retry-After") == "" {
		t.Fatalf("duplicate: %d %s %v", dup.Status, dup.Body, dup.Header)
	}
	orig := <-first
	if orig.Status != http.StatusCreated {
		t.Fatalf("original: %d %s", orig.Status, orig.Body)
	}
	again := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 1))
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, orig.Body) {
		t.Fatalf("retry: %d %s %v", again.Status, again.Body, again.Header)
	}
}

// After IDEMPOTENCY_TTL the key is free again, even before the purge: the
// same key with another request executes it.
func TestKeyFreeAfterExpiry(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t, testkit.Options{KeyTTL: time.Second})
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 1000})
	customer := e.NewCustomer(1_000_000)
	if r := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 1)); r.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	time.Sleep(1100 * time.Millisecond)
	r := e.PlaceOrder(customer.Token, "k", testkit.Line(product, 3))
	if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("after expiry: %d %s %v", r.Status, r.Body, r.Header)
	}
	if got := e.QueryInt(`SELECT count(*) FROM orders`); got != 2 {
		t.Errorf("%d orders, want 2", got)
	}
}
