package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// Read replicas (READ_DATABASE_URL, docs/adr/0023-read-replicas.md): a
// query reads the replica only when it proves to have applied every write
// committed before the request, and the token check stays on the primary.
// These tests run against a real streaming standby of the test server whose
// replay is held back (recovery_min_apply_delay, Standby.Hold), so that the
// replica is certainly behind when the read comes: each write below has
// committed on the primary and is not on the replica. The naive variant
// reads the replica plainly (queries and token checks) and must show the
// past.

// replicaTest runs check against the service's replica reader, where it
// must find nothing wrong, and against plain replica reads, where it must
// find something. check calls hold once its setup is on the replica; in the
// guarded run no read is answered by the replica after that, and when
// readsReachReplica, some find it behind (the lag was forced).
func replicaTest(t *testing.T, readsReachReplica bool, check func(t *testing.T, e *httpkit.Env, hold func()) []string) {
	t.Run("guarded", func(t *testing.T) {
		e := httpkit.New(t, testkit.Options{ReplicaReads: testkit.ReplicaWhenCurrent})
		var answeredBefore float64
		hold := func() {
			e.Standby.Hold(t)
			answeredBefore = e.Metric("ordersvc_replica_reads_total", "outcome", "replica")
		}
		for _, b := range check(t, e, hold) {
			t.Error(b)
		}
		if n := e.Metric("ordersvc_replica_reads_total", "outcome", "replica") - answeredBefore; n != 0 {
			t.Errorf("%v reads were answered by a replica held behind every write of the test", n)
		}
		if n := e.Metric("ordersvc_replica_reads_total", "outcome", "behind"); readsReachReplica && n == 0 {
			t.Error("no read found the replica behind: the lag was not forced, so the test proves nothing")
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		e := httpkit.New(t, testkit.Options{ReplicaReads: testkit.PlainReplicaReads})
		broken := check(t, e, func() { e.Standby.Hold(t) })
		if len(broken) == 0 {
			t.Fatal("plain replica reads kept read-your-writes: this test cannot catch a stale read")
		}
		t.Logf("plain replica reads showed the past, as they must: %v", broken)
	})
}

// TestReplicaReadsCreateThenGet: a product created on the primary is found
// by the GET that follows, in full and in the first page of the list.
func TestReplicaReadsCreateThenGet(t *testing.T) {
	t.Parallel() // the tests that hold the standby take it in turn (testkit.Env)
	replicaTest(t, true, func(t *testing.T, e *httpkit.Env, hold func()) (broken []string) {
		hold()
		created := e.Do("POST", "/v1/products", e.Staff.Token, map[string]any{"sku": "RYW-1", "name": "Fresh", "price_cents": 100, "stock": 5})
		if created.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", created.Status, created.Body)
		}
		id := created.String("id")
		if got := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil); got.Status != http.StatusOK || got.Header.Get("ETag") != created.Header.Get("ETag") {
			broken = append(broken, fmt.Sprintf("GET after create: %d, ETag %q (want 200, %q)", got.Status, got.Header.Get("ETag"), created.Header.Get("ETag")))
		}
		if got := e.Do("GET", "/v1/products/"+id+"/stock", e.Staff.Token, nil); got.Status != http.StatusOK || got.Int("stock") != 5 {
			broken = append(broken, fmt.Sprintf("GET stock after create: %d, stock %d (want 200, 5)", got.Status, got.Int("stock")))
		}
		list := e.Do("GET", "/v1/products?limit=1", e.Staff.Token, nil)
		items, _ := list.JSON["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != id {
			broken = append(broken, fmt.Sprintf("the list after create does not start with the new product: %s", list.Body))
		}
		return broken
	})
}

// TestReplicaReadsPatchThenGet: the GET after a PATCH shows the new version,
// with or without If-None-Match; with the new ETag it is 304.
func TestReplicaReadsPatchThenGet(t *testing.T) {
	t.Parallel() // the tests that hold the standby take it in turn (testkit.Env)
	replicaTest(t, true, func(t *testing.T, e *httpkit.Env, hold func()) (broken []string) {
		id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
		hold()
		patched := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"name": "Renamed"}, "If-Match", `"v1"`)
		if patched.Status != http.StatusOK {
			t.Fatalf("patch: %d %s", patched.Status, patched.Body)
		}
		tag := patched.Header.Get("ETag")
		if got := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil); got.String("name") != "Renamed" || got.Header.Get("ETag") != tag {
			broken = append(broken, fmt.Sprintf("GET after PATCH: name %q, ETag %q (want \"Renamed\", %s)", got.String("name"), got.Header.Get("ETag"), tag))
		}
		if got := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil, "If-None-Match", tag); got.Status != http.StatusNotModified {
			broken = append(broken, fmt.Sprintf("GET with If-None-Match %s after PATCH: %d, ETag %q (want 304)", tag, got.Status, got.Header.Get("ETag")))
		}
		return broken
	})
}

// TestReplicaReadsPlaceThenGet: the order a placement acknowledged, or a
// webhook named, is found by the GET that follows, and so are its effects.
func TestReplicaReadsPlaceThenGet(t *testing.T) {
	t.Parallel() // the tests that hold the standby take it in turn (testkit.Env)
	replicaTest(t, true, func(t *testing.T, e *httpkit.Env, hold func()) (broken []string) {
		product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
		customer := e.NewCustomer(1_000_000)
		hold()
		placed := e.PlaceOrder(customer.Token, "ryw-place", testkit.Line(product, 2))
		if placed.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", placed.Status, placed.Body)
		}
		id := placed.String("id")
		if got := e.Do("GET", "/v1/orders/"+id, customer.Token, nil); got.Status != http.StatusOK {
			broken = append(broken, fmt.Sprintf("GET after place: %d %s (want 200)", got.Status, got.Body))
		}
		if got := e.Do("GET", "/v1/orders/"+id, e.Staff.Token, nil, "If-None-Match", placed.Header.Get("ETag")); got.Status != http.StatusNotModified {
			broken = append(broken, fmt.Sprintf("staff GET with the placement's ETag: %d (want 304)", got.Status))
		}
		if got := e.Do("GET", "/v1/products/"+product+"/stock", customer.Token, nil); got.Int("stock") != 3 {
			broken = append(broken, fmt.Sprintf("stock after placing 2 of 5: %d (want 3)", got.Int("stock")))
		}
		list := e.Do("GET", "/v1/orders", customer.Token, nil)
		if items, _ := list.JSON["items"].([]any); len(items) != 1 {
			broken = append(broken, fmt.Sprintf("the customer's order list after place has %d orders (want 1)", len(items)))
		}
		return broken
	})
}

// TestReplicaReadsIfNoneMatchOfANewerVersion: a GET whose If-None-Match
// names the version a write just made (the caller learned it from the
// write's response, or a webhook) answers 304, never the older body.
func TestReplicaReadsIfNoneMatchOfANewerVersion(t *testing.T) {
	t.Parallel() // the tests that hold the standby take it in turn (testkit.Env)
	replicaTest(t, true, func(t *testing.T, e *httpkit.Env, hold func()) (broken []string) {
		product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
		customer := e.NewCustomer(1_000_000)
		// The naive variant looks tokens up on the replica: the new
		// customer must be there before its first request.
		e.Standby.CatchUp(t)
		placed := e.PlaceOrder(customer.Token, "ryw-inm", testkit.Line(product, 1))
		if placed.Status != http.StatusCreated {
			t.Fatalf("place: %d %s", placed.Status, placed.Body)
		}
		id := placed.String("id")
		hold()
		paid := e.Do("POST", "/v1/orders/"+id+"/payments", customer.Token, map[string]any{"amount_cents": 40}, "Idempotency-Key", "ryw-pay")
		if paid.Status != http.StatusCreated {
			t.Fatalf("pay: %d %s", paid.Status, paid.Body)
		}
		// The payment advanced the order from v1 to v2.
		if got := e.Do("GET", "/v1/orders/"+id, customer.Token, nil, "If-None-Match", `"v2"`); got.Status != http.StatusNotModified {
			broken = append(broken, fmt.Sprintf(`GET with If-None-Match "v2" after the payment: %d, ETag %q, paid_cents %d (want 304)`, got.Status, got.Header.Get("ETag"), got.Int("paid_cents")))
		}
		if got := e.Do("GET", "/v1/orders/"+id, customer.Token, nil, "If-None-Match", `"v1"`); got.Status != http.StatusOK || got.Int("paid_cents") != 40 {
			broken = append(broken, fmt.Sprintf(`GET with If-None-Match "v1" after the payment: %d, paid_cents %d (want 200, 40)`, got.Status, got.Int("paid_cents")))
		}
		return broken
	})
}

// TestReplicaReadsDeactivationIsImmediate: a deactivated actor's token stops
// working at once, also for reads, whose token check stays on the primary.
func TestReplicaReadsDeactivationIsImmediate(t *testing.T) {
	t.Parallel() // the tests that hold the standby take it in turn (testkit.Env)
	replicaTest(t, false, func(t *testing.T, e *httpkit.Env, hold func()) (broken []string) {
		product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
		customer := e.NewCustomer(1_000_000)
		e.Standby.CatchUp(t)
		// The token is known to the process (its token cache), as it is
		// for any caller that came before.
		if got := e.Do("GET", "/v1/products/"+product, customer.Token, nil); got.Status != http.StatusOK {
			t.Fatalf("GET before deactivation: %d %s", got.Status, got.Body)
		}
		hold()
		if got := e.Do("POST", "/v1/actors/"+customer.ID+"/deactivate", e.Staff.Token, nil); got.Status != http.StatusOK {
			t.Fatalf("deactivate: %d %s", got.Status, got.Body)
		}
		for _, path := range []string{"/v1/products/" + product, "/v1/products", "/v1/orders"} {
			if got := e.Do("GET", path, customer.Token, nil); got.Status != http.StatusUnauthorized {
				broken = append(broken, fmt.Sprintf("GET %s with a deactivated actor's token: %d (want 401)", path, got.Status))
			}
		}
		return broken
	})
}

// TestReplicaAnswersWhenCurrent: with the replica caught up, reads are
// answered there, and they are the primary's answers. It is not parallel:
// the replica proves current only when it has replayed all the WAL written
// before the read, and the package's parallel tests write all the time.
// Other writers (other test binaries on the server) can still put it behind
// for a moment, so the read is repeated until the replica answers one.
func TestReplicaAnswersWhenCurrent(t *testing.T) {
	e := httpkit.New(t, testkit.Options{ReplicaReads: testkit.ReplicaWhenCurrent})
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
	e.Standby.CatchUp(t)
	deadline := time.Now().Add(2 * time.Minute)
	for e.Metric("ordersvc_replica_reads_total", "outcome", "replica") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no read was answered by the caught-up replica in 2 min (behind: %v, failed: %v)",
				e.Metric("ordersvc_replica_reads_total", "outcome", "behind"), e.Metric("ordersvc_replica_reads_total", "outcome", "failed"))
		}
		got := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil)
		if got.Status != http.StatusOK || got.String("name") != "Test product" || got.Header.Get("ETag") != `"v1"` {
			t.Fatalf("GET: %d %s", got.Status, got.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("replica reads: %v answered there, %v found it behind", e.Metric("ordersvc_replica_reads_total", "outcome", "replica"),
		e.Metric("ordersvc_replica_reads_total", "outcome", "behind"))
}

// TestReplicaDownReadsThePrimary: a replica that cannot be reached costs
// the primary a read, never an answer, and is counted.
func TestReplicaDownReadsThePrimary(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t, testkit.Options{ReplicaReads: testkit.ReplicaWhenCurrent,
		ReadReplicaURL: "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=2"})
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
	for _, path := range []string{"/v1/products/" + id, "/v1/products", "/v1/stock", "/v1/orders"} {
		if got := e.Do("GET", path, e.Staff.Token, nil); got.Status != http.StatusOK {
			t.Errorf("GET %s with the replica down: %d %s", path, got.Status, got.Body)
		}
	}
	if n := e.Metric("ordersvc_replica_reads_total", "outcome", "failed"); n != 4 {
		t.Errorf("replica reads counted failed: %v, want 4", n)
	}
}
