package maintenance_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// seedAged inserts n events in state whose occurred_at, and for delivered
// ones delivered_at, is the SQL expression at (g is the row number).
func seedAged(t *testing.T, pool *postgres.Pool, n int, state, at string) {
	t.Helper()
	delivered, claimed := "NULL", "NULL"
	if state == "delivered" {
		delivered = at
	}
	if state == "claimed" {
		claimed = "now()"
	}
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A large seed on a busy machine may outlast the pool's statement timeout.
	if _, err := conn.Exec(ctx, `SET statement_timeout = '3min'`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET statement_timeout`) //nolint:errcheck
	_, err = conn.Exec(ctx, fmt.Sprintf(`
		INSERT INTO outbox_events (id, type, aggregate_id, payload, occurred_at, state, attempts, delivered_at, claimed_at)
		SELECT gen_random_uuid(), 'order.placed', gen_random_uuid(), '{"n": 1}', %[1]s, $2, 1, %[2]s, %[3]s
		FROM generate_series(1, $1::int) g`, at, delivered, claimed), n, state)
	if err != nil {
		t.Fatal(err)
	}
}

const retention = 168 * time.Hour

// TestOutboxRetentionDeletesOnlyOldDeliveredEvents: two replicas run the
// retention at once over 2,500 events delivered more than OUTBOX_RETENTION
// ago, next to recent deliveries and to pending, claimed and dead events
// just as old. Only the old deliveries go, each counted once across both
// replicas. A deletion by age alone, which forgets that an old event may
// never have been delivered, is shown to delete the dead, pending and
// claimed ones too.
func TestOutboxRetentionDeletesOnlyOldDeliveredEvents(t *testing.T) {
	t.Parallel()
	const old = 2500
	seed := func(t *testing.T) *postgres.Pool {
		pool := testkit.GuardedPool(t)
		seedAged(t, pool, old, "delivered", `now() - interval '169 hours' - g * interval '1 second'`)
		seedAged(t, pool, 300, "delivered", `now() - interval '167 hours'`)
		for _, st := range []string{"dead", "pending", "claimed"} {
			seedAged(t, pool, 100, st, `now() - interval '400 hours'`)
		}
		return pool
	}
	check := func(t *testing.T, pool *postgres.Pool, reported int64) (broken []string) {
		st := testkit.OutboxStates(t, pool)
		t.Logf("reported %d deleted; left: %v", reported, st)
		if st["delivered"] != 300 {
			broken = append(broken, fmt.Sprintf("%d delivered events left, want the 300 recent ones", st["delivered"]))
		}
		for _, s := range []string{"dead", "pending", "claimed"} {
			if st[s] != 100 {
				broken = append(broken, fmt.Sprintf("%d of 100 old %s events left", st[s], s))
			}
		}
		if reported != old {
			broken = append(broken, fmt.Sprintf("reported %d deletions, want %d", reported, old))
		}
		return broken
	}
	t.Run("delivered only, bounded batches, one replica at a time", func(t *testing.T) {
		t.Parallel()
		pool := seed(t)
		regs := [2]*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
		var reported atomic.Int64
		testkit.Race(2, func(i int) {
			r := maintenance.NewOutboxRetention(pool, testkit.Logger(t), regs[i], maintenance.RetentionConfig{Retention: retention, BatchSize: 200})
			for testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE state = 'delivered' AND delivered_at < now() - interval '168 hours'`) > 0 {
				n, err := r.DeleteOnce(context.Background())
				if err != nil {
					t.Errorf("retention %d: %v", i, err)
					return
				}
				reported.Add(n)
			}
		})
		for _, s := range check(t, pool, reported.Load()) {
			t.Error(s)
		}
		a, b := testkit.Metric(t, regs[0], "ordersvc_outbox_deleted_total"), testkit.Metric(t, regs[1], "ordersvc_outbox_deleted_total")
		t.Logf("deleted_total per replica: %.0f and %.0f", a, b)
		if a+b != old {
			t.Errorf("deleted_total summed over both replicas = %v, want %d", a+b, old)
		}
	})
	t.Run("deletion by age alone is caught", func(t *testing.T) {
		t.Parallel()
		pool := seed(t)
		tag, err := pool.Exec(context.Background(), `DELETE FROM outbox_events WHERE occurred_at < now() - interval '168 hours'`)
		if err != nil {
			t.Fatal(err)
		}
		broken := check(t, pool, tag.RowsAffected())
		if len(broken) == 0 {
			t.Fatal("the age-only deletion kept every undelivered event: the test cannot tell the two apart")
		}
		t.Logf("naive variant broke the rule as expected: %v", broken)
	})
}

// placementsDuringDeletion fills the outbox with 200,000 events delivered
// long ago, starts remove, and places orders while it runs: eight customers
// placing three orders each, every placement writing its order.placed event
// into the table being cleaned. remove may close started once it holds its
// locks, and may wait for placed, closed when the placements are done.
func placementsDuringDeletion(t *testing.T, remove func(e *httpkit.Env, started chan<- struct{}, placed <-chan struct{}) (int64, error)) (statuses map[int]int) {
	const customers, perCustomer, filler = 8, 3, 200_000
	e := httpkit.New(t, testkit.Options{MaxConns: 24})
	type buyer struct {
		actor   testkit.Actor
		product string
	}
	buyers := make([]buyer, customers)
	for i := range buyers {
		buyers[i] = buyer{e.NewCustomer(1_000_000_000), e.NewProduct(testkit.ProductSpec{PriceCents: 1, Stock: 1_000_000})}
	}
	seedAged(t, e.Pool, filler, "delivered", `now() - interval '200 hours' - g * interval '10 ms'`)

	statuses = map[int]int{}
	var mu sync.Mutex
	var lat []time.Duration
	started, placed := make(chan struct{}), make(chan struct{})
	var openGate sync.Once
	defer openGate.Do(func() { close(placed) })
	removed := make(chan error, 1)
	var deleted int64
	began := time.Now()
	go func() {
		var err error
		deleted, err = remove(e, started, placed)
		removed <- err
	}()
	testkit.WaitFor(t, 2*time.Minute, "the deletion to start", func() bool {
		select {
		case <-started:
			return true
		default:
		}
		return testkit.QueryInt(t, e.Pool, `SELECT count(*) FROM outbox_events WHERE state = 'delivered'`) < filler
	})
	testkit.Race(customers, func(c int) {
		for i := 1; i <= perCustomer; i++ {
			t0 := time.Now()
			res := e.Do("POST", "/v1/orders", buyers[c].actor.Token,
				map[string]any{"lines": []map[string]any{{"product_id": buyers[c].product, "quantity": 1}}},
				"Idempotency-Key", fmt.Sprintf("during-%d", i))
			mu.Lock()
			lat = append(lat, time.Since(t0))
			statuses[res.Status]++
			mu.Unlock()
		}
	})
	openGate.Do(func() { close(placed) })
	placedBy := time.Since(began)
	if err := <-removed; err != nil {
		t.Fatalf("deletion: %v", err)
	}
	t.Logf("deletion of %d delivered events took %s; the %d placements finished %s after it began; statuses %v",
		deleted, time.Since(began).Round(time.Millisecond), customers*perCustomer, placedBy.Round(time.Millisecond), statuses)
	t.Logf("placement latency during the deletion: %s", summary(lat))
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events WHERE type = 'order.placed' AND state = 'pending'`); n != int64(statuses[http.StatusCreated]) {
		t.Errorf("%d order.placed events pending for %d placements", n, statuses[http.StatusCreated])
	}
	return statuses
}

// TestPlacementsDoNotStallDuringLargeOutboxDeletion deletes 200,000
// delivered events while customers place orders, each placement inserting
// its event into the same table. The retention's batches are short
// transactions that take no table lock (the one-replica rule is an advisory
// lock), so every placement succeeds. A DELETE alone does not block inserts
// in PostgreSQL; what does is the naive way to keep the deletion to one
// replica, a table lock, held for the length of one unbounded DELETE: the
// naive run takes it, deletes everything in one statement, and holds its
// transaction open at a gate until the placements are done, which is what
// a long deletion does to them; the placements run out of their lock
// timeout.
func TestPlacementsDoNotStallDuringLargeOutboxDeletion(t *testing.T) {
	t.Parallel()
	// The two run at once, each on a database of its own.
	t.Run("bounded batches, advisory lock", func(t *testing.T) {
		t.Parallel()
		statuses := placementsDuringDeletion(t, func(e *httpkit.Env, _ chan<- struct{}, _ <-chan struct{}) (int64, error) {
			return maintenance.NewOutboxRetention(e.Pool, testkit.Logger(t), nil, maintenance.RetentionConfig{Retention: retention}).DeleteOnce(context.Background())
		})
		if statuses[http.StatusCreated] != 24 {
			t.Errorf("placements during the deletion: %v; want all 24 created", statuses)
		}
	})
	t.Run("naive table-locked unbounded delete is caught", func(t *testing.T) {
		t.Parallel()
		statuses := placementsDuringDeletion(t, func(e *httpkit.Env, started chan<- struct{}, placed <-chan struct{}) (int64, error) {
			ctx := context.Background()
			tx, err := e.Pool.Begin(ctx)
			if err != nil {
				return 0, err
			}
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
			if _, err := tx.Exec(ctx, `LOCK TABLE outbox_events IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return 0, err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM outbox_events WHERE state = 'delivered' AND delivered_at < now() - interval '168 hours'`)
			if err != nil {
				return 0, err
			}
			close(started)
			<-placed // the gate: the deletion's transaction stays open while every placement runs
			return tag.RowsAffected(), tx.Commit(ctx)
		})
		if statuses[http.StatusCreated] == 24 {
			t.Fatal("no placement stalled behind the table-locked delete: the test cannot tell the two deletions apart")
		}
		t.Logf("naive variant stalled placements as expected: %v", statuses)
	})
}
