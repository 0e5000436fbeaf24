package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestPlacementAcrossFailoverWithMultiHostURL: the service runs on a
// multi-host DATABASE_URL with target_session_attrs=read-write over a
// primary and its synchronous standby (the alternative to HAProxy,
// docs/ha.md). The primary dies (pg_ctl stop -m immediate). Until the
// standby is promoted, a placement is a 503 with Retry-After that comes
// within REQUEST_TIMEOUT (plus slack for a loaded machine), and /readyz says
// 503. After the promotion, the client's retry with the same key places
// exactly one order, the order acknowledged before the crash is still
// there, and /readyz says 200, with no restart of the service.
func TestPlacementAcrossFailoverWithMultiHostURL(t *testing.T) {
	t.Parallel()
	rep := testkit.StartReplication(t, true)
	const requestTimeout = 5 * time.Second
	e := httpkit.New(t, testkit.Options{DatabaseURL: rep.MultiHostURL(), RequestTimeout: requestTimeout, KeyWait: 2 * time.Second})
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1000})

	before := e.PlaceOrder(customer.Token, "before-crash", testkit.Line(product, 1))
	if before.Status != http.StatusCreated {
		t.Fatalf("placement before the crash: %d %s", before.Status, before.Body)
	}
	rep.Primary.Stop()

	start := time.Now()
	during := e.PlaceOrder(customer.Token, "across-failover", testkit.Line(product, 1))
	took := time.Since(start)
	if during.Status != http.StatusServiceUnavailable || during.Header.Get("Retry-After") == "" {
		t.Fatalf("placement with the primary down: %d (Retry-After %q) %s (err %v), want 503 with Retry-After",
			during.Status, during.Header.Get("Retry-After"), during.Body, during.Err)
	}
	if took > requestTimeout+10*time.Second {
		t.Errorf("the placement took %s with the primary down, past REQUEST_TIMEOUT (%s)", took, requestTimeout)
	}
	if r := e.Do("GET", "/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the primary down: %d, want 503", r.Status)
	}

	rep.Standby.Promote()
	var after *httpkit.Response
	for attempt := 1; attempt <= 30; attempt++ {
		after = e.PlaceOrder(customer.Token, "across-failover", testkit.Line(product, 1))
		if after.Status == http.StatusCreated || after.Status == http.StatusOK {
			t.Logf("retry %d of the same key placed the order on the promoted standby", attempt)
			break
		}
		if after.Status != http.StatusServiceUnavailable && after.Status != http.StatusConflict {
			t.Fatalf("retry %d: %d %s, want 201, or 503/409 while the pool reconnects", attempt, after.Status, after.Body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if after.Status != http.StatusCreated && after.Status != http.StatusOK {
		t.Fatalf("30 retries after the promotion: %d %s", after.Status, after.Body)
	}
	if r := e.Do("GET", "/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz after the promotion: %d, want 200", r.Status)
	}
	if n := rep.Standby.Int("SELECT count(*) FROM orders WHERE id = $1", before.String("id")); n != 1 {
		t.Errorf("the order acknowledged before the crash is on the promoted standby %d times, want 1", n)
	}
	if n := rep.Standby.Int("SELECT count(*) FROM orders WHERE customer_id = $1", customer.ID); n != 2 {
		t.Errorf("%d orders for two keys, want 2", n)
	}
	if n := rep.Standby.Int("SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'"); n != 0 {
		t.Errorf("%d keys left in progress", n)
	}
	e.Check()
}
