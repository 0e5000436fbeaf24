package faults_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestRequestDeadlineBoundsAWaitInPgBouncersQueue: behind PgBouncer, a
// statement sent while PostgreSQL is down does not fail: it waits in
// PgBouncer's queue for a server connection (query_wait_timeout, 120 s by
// default). The request's own deadline (REQUEST_TIMEOUT) bounds it: the
// caller gets 503 with Retry-After in about that time. The naive variant,
// no request deadline, is still waiting when the client gives up after
// 10 s, twenty times the deadline, which the guarded answer must beat
// however busy the machine.
func TestRequestDeadlineBoundsAWaitInPgBouncersQueue(t *testing.T) {
	t.Parallel()
	url := testkit.Direct(testkit.DB(t))
	proxy := testkit.NewProxy(t, testkit.HostPort(t, url)) // PostgreSQL, as PgBouncer sees it
	// One PgBouncer per variant: each variant's request is the first that
	// its PgBouncer queues after the outage (later ones may be refused at
	// once with "server login has been failing", which is a 503 too).
	target := testkit.HostPort(t, proxy.Via(url))
	const deadline, patience = 500 * time.Millisecond, 10 * time.Second
	guarded := httpkit.New(t, testkit.Options{DatabaseURL: testkit.StartPgBouncer(t, target).Via(url), RequestTimeout: deadline})
	naive := httpkit.New(t, testkit.Options{DatabaseURL: testkit.StartPgBouncer(t, target).Via(url)})
	customer := guarded.NewCustomer(1_000_000)
	product := guarded.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1000})
	for _, e := range []*httpkit.Env{guarded, naive} {
		if r := e.Do("GET", "/v1/products/"+product, customer.Token, nil); r.Status != http.StatusOK {
			t.Fatalf("before the outage: %d %s", r.Status, r.Body)
		}
	}

	proxy.Stop() // PostgreSQL is gone; PgBouncer and the pools' connections to it stay

	naiveDone := make(chan string, 1)
	go func() {
		client := &http.Client{Timeout: patience}
		req, _ := http.NewRequest("GET", naive.Server.URL+"/v1/products/"+product, nil)
		req.Header.Set("Authorization", "Bearer "+customer.Token)
		start := time.Now()
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
			naiveDone <- fmt.Sprintf("answered %d after %s", res.StatusCode, time.Since(start))
			return
		}
		naiveDone <- ""
	}()
	start := time.Now()
	r := guarded.Do("POST", "/v1/orders", customer.Token, orderBody(product, 1), "Idempotency-Key", "during")
	took := time.Since(start)
	t.Logf("with REQUEST_TIMEOUT=%s: %d %s after %s", deadline, r.Status, r.Code(), took.Round(time.Millisecond))
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("during the outage: %d %s, want 503 with Retry-After", r.Status, r.Body)
	}
	if took > patience {
		t.Fatalf("answered only after %s with a %s deadline", took, deadline)
	}

	if answer := <-naiveDone; answer != "" {
		t.Fatalf("naive variant: %s; the test cannot tell a bounded wait from an unbounded one", answer)
	}
	t.Logf("naive variant (no request deadline): no answer within the client's %s", patience)
	proxy.Start()
}
