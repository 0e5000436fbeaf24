package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// Two replicas of the real binary share one database, as behind a load
// balancer (docs/scaling.md). With TEST_PGBOUNCER=1 both go through
// PgBouncer in transaction mode.

// sameKeyStorm starts two replicas and sends n requests with one key and
// one body at once, alternating between them. It returns the answers and
// the number of orders placed.
func sameKeyStorm(t *testing.T, extraEnv ...string) (answers []*reply, orders int) {
	t.Helper()
	bin := buildAPI(t)
	dbURL := testkit.DB(t)
	env := append(append([]string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=error", "DB_MAX_CONNS=8"}, patientWaits...), extraEnv...)
	staff := actorCreate(t, bin, env, "staff")
	customer := actorCreate(t, bin, env, "customer")
	a, b := startAPI(t, bin, env), startAPI(t, bin, env)
	res := call(t, a.base, "POST", "/v1/products", staff, `{"sku":"STORM-1","name":"Storm","price_cents":100,"stock":1000}`, "")
	product := res.json["id"].(string)

	const n = 32
	answers = make([]*reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		base := a.base
		if i%2 == 1 {
			base = b.base
		}
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			<-start
			answers[i], errs[i] = send(client, base, "POST", "/v1/orders", customer, orderBody(product, 2), "storm-key")
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	db := dbConn(t, testkit.Direct(dbURL))
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	return answers, orders
}

// TestReplicasSameKeyStorm: 32 requests with one Idempotency-Key, spread
// over two replicas, execute once; every caller gets the same 201 and the
// same order (EXT.IDEMPOTENCY.KEY.001, REPLAY.001). The claim is a row in
// the shared database, not anything in a replica's memory. The naive
// variant (BENCH_DISABLE_IDEMPOTENCY=1: the key is validated but not
// claimed) places an order per request and is caught.
//
// Patterns and rule ids: docs/patterns.md.
func TestReplicasSameKeyStorm(t *testing.T) {
	t.Parallel()
	t.Run("naive without the claim is caught", func(t *testing.T) {
		t.Parallel()
		_, orders := sameKeyStorm(t, "BENCH_DISABLE_IDEMPOTENCY=1")
		if orders <= 1 {
			t.Fatalf("without the claim the storm placed %d order(s): the test cannot tell", orders)
		}
		t.Logf("naive variant: one key, %d orders", orders)
	})
	t.Run("one execution, identical answers", func(t *testing.T) {
		t.Parallel()
		answers, orders := sameKeyStorm(t)
		replayed := 0
		for i, r := range answers {
			if r.status != http.StatusCreated {
				t.Fatalf("request %d: %d %s", i, r.status, r.body)
			}
			if r.json["id"] != answers[0].json["id"] || string(r.body) != string(answers[0].body) {
				t.Fatalf("request %d answered %s, request 0 %s", i, r.body, answers[0].body)
			}
			if r.header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		}
		if orders != 1 || replayed != len(answers)-1 {
			t.Fatalf("%d orders, %d of %d answers replayed; want 1 order and every answer but one replayed", orders, replayed, len(answers))
		}
		t.Logf("%d requests over 2 replicas: 1 order, %d replays, identical bodies", len(answers), replayed)
	})
}

// TestReplicaKilledMidLoad: 8 clients place orders through two replicas,
// alternating; one replica is killed (SIGKILL) mid-load, and a client whose
// request to it failed retries the same key on the other, as a load
// balancer's retry would. Every acknowledged order is stored, every key
// has at most one order, and the survivor keeps serving.
func TestReplicaKilledMidLoad(t *testing.T) {
	t.Parallel()
	bin := buildAPI(t)
	dbURL := testkit.DB(t)
	env := append([]string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=error", "DB_MAX_CONNS=8"}, patientWaits...)
	staff := actorCreate(t, bin, env, "staff")
	customer := actorCreate(t, bin, env, "customer")
	a, b := startAPI(t, bin, env), startAPI(t, bin, env)
	res := call(t, a.base, "POST", "/v1/products", staff, `{"sku":"KILL-R","name":"Replica kill","price_cents":1,"stock":1000000}`, "")
	product := res.json["id"].(string)

	var (
		mu       sync.Mutex
		acked    = map[string]string{} // key -> order id
		failover atomic.Int64
		killed   atomic.Bool
		afterB   atomic.Int64 // answers from the survivor after the kill
	)
	const clients, perClient = 8, 120
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for i := range perClient {
				key, body := fmt.Sprintf("w%d-%d", w, i), orderBody(product, 1)
				first, other := a.base, b.base
				if i%2 == 1 {
					first, other = b.base, a.base
				}
				r, err := send(client, first, "POST", "/v1/orders", customer, body, key)
				if err != nil {
					failover.Add(1)
					r, err = send(client, other, "POST", "/v1/orders", customer, body, key)
				}
				if err != nil {
					t.Errorf("key %s failed on both replicas: %v", key, err)
					return
				}
				if r.status != http.StatusCreated {
					t.Errorf("key %s: %d %s", key, r.status, r.body)
					return
				}
				mu.Lock()
				acked[key] = r.json["id"].(string)
				n := len(acked)
				mu.Unlock()
				if killed.Load() {
					afterB.Add(1)
				}
				if n >= clients*perClient/4 && killed.CompareAndSwap(false, true) {
					_ = a.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		})
	}
	wg.Wait()
	if !killed.Load() {
		t.Fatal("the replica was never killed: the load did not run")
	}
	_ = a.cmd.Wait()

	ids := make([]uuid.UUID, 0, len(acked))
	for _, id := range acked {
		ids = append(ids, uuid.MustParse(id))
	}
	db := dbConn(t, testkit.Direct(dbURL))
	var stored, orders, records int
	ctx := context.Background()
	if err := db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY ($1)`, ids).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE operation = 'placeOrder'`).Scan(&records); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys acknowledged, %d of their orders stored; %d orders, %d key records; %d requests failed over to the survivor; %d answers from it after the kill",
		len(acked), stored, orders, records, failover.Load(), afterB.Load())
	if stored != len(acked) {
		t.Fatalf("%d orders acknowledged, %d stored: an acknowledged order was lost", len(acked), stored)
	}
	if orders != records || orders != len(acked) {
		t.Fatalf("%d orders for %d key records and %d acknowledged keys: a key has two orders, or an order no key", orders, records, len(acked))
	}
	if afterB.Load() == 0 {
		t.Fatal("the survivor answered nothing after the kill")
	}
}
