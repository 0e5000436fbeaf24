package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// ---- a real local HTTP receiver

// hang is an answer that makes the receiver wait until the client gives up.
const hang = -1

// receiver is a webhook endpoint on an httptest server. It checks the shape
// of every request and counts, per Idempotency-Key, every request and every
// 2xx answer it gave.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	tries  map[string][]time.Time
	acked  map[string]int
	bad    []string
	answer atomic.Pointer[func(key string, try int, data map[string]any) int]
	seen   chan struct{} // one value per request, when someone listens
}

func newReceiver(t *testing.T, answer func(key string, try int, data map[string]any) int) *receiver {
	t.Helper()
	r := &receiver{tries: map[string][]time.Time{}, acked: map[string]int{}, seen: make(chan struct{}, 1)}
	r.setAnswer(answer)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func always(status int) func(string, int, map[string]any) int {
	return func(string, int, map[string]any) int { return status }
}

func (r *receiver) setAnswer(f func(key string, try int, data map[string]any) int) {
	r.answer.Store(&f)
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	key := req.Header.Get("Idempotency-Key")
	var ev struct {
		ID         string         `json:"id"`
		Type       string         `json:"type"`
		OccurredAt time.Time      `json:"occurred_at"`
		Data       map[string]any `json:"data"`
	}
	dec := json.NewDecoder(req.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&ev)
	r.mu.Lock()
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || key == "" ||
		err != nil || ev.ID != key || ev.Type == "" || ev.OccurredAt.IsZero() || ev.Data == nil {
		r.bad = append(r.bad, fmt.Sprintf("%s %q key=%q id=%q err=%v", req.Method, req.Header.Get("Content-Type"), key, ev.ID, err))
	}
	r.tries[key] = append(r.tries[key], time.Now())
	try := len(r.tries[key])
	status := (*r.answer.Load())(key, try, ev.Data)
	if status >= 200 && status < 300 {
		r.acked[key]++
	}
	r.mu.Unlock()
	select {
	case r.seen <- struct{}{}:
	default:
	}
	if status == hang {
		<-req.Context().Done()
		return
	}
	if status == http.StatusFound {
		w.Header().Set("Location", "/elsewhere")
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "answer %d", status)
}

// counts returns how many keys were acknowledged, how many of them more than
// once, and how many requests arrived in all.
func (r *receiver) counts() (acked, duplicated, requests int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.acked {
		acked++
		if n > 1 {
			duplicated++
		}
	}
	for _, ts := range r.tries {
		requests += len(ts)
	}
	return acked, duplicated, requests
}

func (r *receiver) checkShape(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("%d malformed deliveries, first: %s", len(r.bad), r.bad[0])
	}
}

// ---- database and dispatcher helpers

// seedEvents inserts n pending events, as committed use cases would have,
// and returns their ids.
func seedEvents(t *testing.T, pool *postgres.Pool, n int, data string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		INSERT INTO outbox_events (id, type, aggregate_id, payload)
		SELECT gen_random_uuid(), 'stock.adjusted', gen_random_uuid(), jsonb_build_object('n', g) || $2::jsonb
		FROM generate_series(1, $1::int) g
		RETURNING id::text`, n, data)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// fastConfig is a dispatcher configuration scaled down for tests: short
// polls and backoffs. Its timeouts stay long, so that no delivery fails and
// no claim expires for slowness on a busy machine; a test of a timeout sets
// its own.
func fastConfig(url string) outbox.OutboxConfig {
	return outbox.OutboxConfig{
		WebhookURL: url, PollInterval: 20 * time.Millisecond, BatchSize: 50, MaxAttempts: 5,
		ClaimTimeout: time.Minute, HTTPTimeout: 10 * time.Second,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
}

func newDispatcher(t *testing.T, pool *postgres.Pool, cfg outbox.OutboxConfig) (*outbox.Dispatcher, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return outbox.NewDispatcher(pool, testkit.Logger(t), reg, cfg), reg
}

type runner interface{ Run(ctx context.Context) }

// start runs the runners on goroutines released together and returns a stop
// function that cancels them and waits until every one has returned.
func start(rs ...runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	gun := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			<-gun
			r.Run(ctx)
		})
	}
	close(gun)
	return func() { cancel(); wg.Wait() }
}

// ---- the tests

// dispatchRace delivers 1,000 events with three dispatchers started together
// and returns what the receiver counted.
func dispatchRace(t *testing.T, pool *postgres.Pool, rcv *receiver, dispatchers ...runner) (acked, duplicated, requests int) {
	const events = 1000
	seedEvents(t, pool, events, `{}`)
	began := time.Now()
	stop := start(dispatchers...)
	testkit.WaitFor(t, 2*time.Minute, "every event delivered", func() bool {
		return testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE state <> 'delivered'`) == 0
	})
	stop()
	acked, duplicated, requests = rcv.counts()
	t.Logf("%d dispatchers, %d events: %d keys acknowledged, %d of them more than once, %d requests, in %s",
		len(dispatchers), events, acked, duplicated, requests, time.Since(began).Round(time.Millisecond))
	if acked != events {
		t.Errorf("the receiver acknowledged %d distinct events, want %d", acked, events)
	}
	return acked, duplicated, requests
}

// TestDispatchersDeliverEachEventOnce: three dispatchers claiming from one
// table with FOR UPDATE SKIP LOCKED and a committed claimed state deliver
// each of 1,000 events exactly once when nothing fails. A dispatcher that
// selects due events without claiming them (no SKIP LOCKED, no claimed
// state) is shown to deliver duplicates under the same race.
func TestDispatchersDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	t.Run("claimed with SKIP LOCKED", func(t *testing.T) {
		t.Parallel()
		pool := testkit.GuardedPool(t)
		rcv := newReceiver(t, always(http.StatusOK))
		var ds []runner
		var regs []*prometheus.Registry
		// Nothing may fail here, slowness included: fastConfig's long
		// timeouts keep the reaper (at least once, by design; it has its
		// own tests) from handing a slow claim to another dispatcher.
		cfg := fastConfig(rcv.srv.URL)
		for range 3 {
			d, reg := newDispatcher(t, pool, cfg)
			ds, regs = append(ds, d), append(regs, reg)
		}
		_, duplicated, requests := dispatchRace(t, pool, rcv, ds...)
		rcv.checkShape(t)
		if duplicated != 0 || requests != 1000 {
			t.Errorf("%d events delivered more than once, %d requests for 1000 events; want exactly once each", duplicated, requests)
		}
		if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE attempts <> 1 OR delivered_at IS NULL`); n != 0 {
			t.Errorf("%d events took other than one attempt", n)
		}
		var per []string
		for i, reg := range regs {
			per = append(per, fmt.Sprintf("dispatcher %d: %.0f", i+1, testkit.Metric(t, reg, "ordersvc_outbox_delivered_total")))
		}
		t.Logf("deliveries per dispatcher: %s", strings.Join(per, ", "))
	})
	t.Run("naive select-then-deliver is caught", func(t *testing.T) {
		t.Parallel()
		pool := testkit.GuardedPool(t)
		rcv := newReceiver(t, always(http.StatusOK))
		var ds []runner
		for range 3 {
			ds = append(ds, naiveDispatcher{pool: pool, url: rcv.srv.URL})
		}
		_, duplicated, requests := dispatchRace(t, pool, rcv, ds...)
		if duplicated == 0 {
			t.Fatal("the naive dispatchers delivered every event once: the test cannot tell a claim from a plain read")
		}
		t.Logf("naive variant broke exactly-once as expected: %d events delivered more than once (%d requests for 1000 events)", duplicated, requests)
	})
}

// naiveDispatcher reads due events with a plain SELECT, delivers them, and
// then marks them delivered: nothing stops another dispatcher from reading
// the same rows in between.
type naiveDispatcher struct {
	pool *postgres.Pool
	url  string
}

func (n naiveDispatcher) Run(ctx context.Context) {
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for ctx.Err() == nil {
		rows, err := n.pool.Query(ctx, `SELECT id, type, occurred_at, payload FROM outbox_events
			WHERE state = 'pending' AND available_at <= now() ORDER BY available_at, id LIMIT 50`)
		if err != nil {
			return
		}
		type ev struct {
			ID         uuid.UUID       `json:"id"`
			Type       string          `json:"type"`
			OccurredAt time.Time       `json:"occurred_at"`
			Data       json.RawMessage `json:"data"`
		}
		var batch []ev
		for rows.Next() {
			var e ev
			if err := rows.Scan(&e.ID, &e.Type, &e.OccurredAt, &e.Data); err != nil {
				rows.Close()
				return
			}
			batch = append(batch, e)
		}
		rows.Close()
		for _, e := range batch {
			body, _ := json.Marshal(e)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", e.ID.String())
			res, err := client.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			_, _ = n.pool.Exec(ctx, `UPDATE outbox_events SET state = 'delivered', delivered_at = now() WHERE id = $1`, e.ID)
		}
		if len(batch) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestReaperRecoversAbandonedClaim: a dispatcher claims a batch and dies. The
// events stay invisible to the other dispatchers until the claim times out;
// then the reaper gives them back and they are delivered (at least once).
// When the dead dispatcher comes back with its stale claim, it delivers
// nothing and records nothing: the claim is past its time.
func TestReaperRecoversAbandonedClaim(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	rcv := newReceiver(t, always(http.StatusNoContent))
	ids := seedEvents(t, pool, 10, `{}`)
	cfg := fastConfig(rcv.srv.URL)
	// A claim expires after 4 s; each POST may take 2 s, ten times what a
	// local receiver needs on a busy machine, so the survivor's own
	// deliveries do not fail (the test counts the attempts).
	cfg.ClaimTimeout, cfg.HTTPTimeout = 4*time.Second, 2*time.Second
	ctx := context.Background()

	crashed, _ := newDispatcher(t, pool, cfg)
	claim, err := crashed.Claim(ctx)
	if err != nil || len(claim.Events) != len(ids) {
		t.Fatalf("claim: %d events, %v", len(claim.Events), err)
	}
	survivor, reg := newDispatcher(t, pool, cfg)
	if n, err := survivor.DispatchOnce(ctx); err != nil || n != 0 {
		t.Fatalf("another dispatcher claimed %d events that were already claimed (%v)", n, err)
	}
	began := time.Now()
	stop := start(survivor)
	testkit.WaitFor(t, 30*time.Second, "the abandoned events delivered", func() bool { return testkit.OutboxStates(t, pool)["delivered"] == len(ids) })
	stop()
	acked, duplicated, requests := rcv.counts()
	t.Logf("abandoned claim of %d events: delivered %s after the survivor started; %d acknowledged, %d duplicated, %d requests; reaped %.0f",
		len(ids), time.Since(began).Round(time.Millisecond), acked, duplicated, requests, testkit.Metric(t, reg, "ordersvc_outbox_reaped_total"))
	if acked != len(ids) {
		t.Errorf("%d of %d events reached the receiver", acked, len(ids))
	}
	if r := testkit.Metric(t, reg, "ordersvc_outbox_reaped_total"); r != float64(len(ids)) {
		t.Errorf("reaped %v events, want %d", r, len(ids))
	}
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE attempts = 2`); n != len(ids) {
		t.Errorf("%d events show 2 attempts (the abandoned claim and the delivery), want %d", n, len(ids))
	}

	// The crashed dispatcher resumes with its stale claim.
	if err := crashed.Deliver(ctx, claim); err != nil {
		t.Fatalf("stale deliver: %v", err)
	}
	if _, _, after := rcv.counts(); after != requests {
		t.Errorf("the stale claim sent %d more requests after it expired", after-requests)
	}
	if st := testkit.OutboxStates(t, pool); st["delivered"] != len(ids) {
		t.Errorf("states after the stale claim resumed: %v", st)
	}
	rcv.checkShape(t)
}

// TestBackoffThenDeliveryWhenReceiverReturns: the receiver answers 503 for a
// while. Each failed event is retried no sooner than its backoff allows, the
// rest of its batch is given back untried, and once the receiver is back
// every event is delivered exactly once.
func TestBackoffThenDeliveryWhenReceiverReturns(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	var up atomic.Bool
	rcv := newReceiver(t, func(string, int, map[string]any) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	ids := seedEvents(t, pool, 20, `{}`)
	cfg := fastConfig(rcv.srv.URL)
	cfg.BackoffBase, cfg.BackoffMax, cfg.MaxAttempts = 40*time.Millisecond, 320*time.Millisecond, 100
	d, reg := newDispatcher(t, pool, cfg)
	stop := start(d)
	testkit.WaitFor(t, 20*time.Second, "a few events retried while the receiver is down", func() bool {
		return testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE attempts >= 3`) >= 3
	})
	_, _, downRequests := rcv.counts()
	up.Store(true)
	testkit.WaitFor(t, 20*time.Second, "every event delivered after the receiver came back", func() bool {
		return testkit.OutboxStates(t, pool)["delivered"] == len(ids)
	})
	stop()
	acked, duplicated, requests := rcv.counts()
	rcv.checkShape(t)
	if acked != len(ids) || duplicated != 0 {
		t.Errorf("%d of %d events acknowledged, %d more than once", acked, len(ids), duplicated)
	}
	if f := testkit.Metric(t, reg, "ordersvc_outbox_failed_total", "kind", "transient"); f != float64(requests-len(ids)) {
		t.Errorf("failed_total{kind=transient} = %v, want %d", f, requests-len(ids))
	}

	// Retries of one event are spaced at least by the backoff floor: half of
	// min(max, base × 2^(n-1)) after the n-th failure.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var spaced []string
	for key, ts := range rcv.tries {
		for n := 1; n < len(ts); n++ {
			floor := min(cfg.BackoffMax, cfg.BackoffBase<<(n-1)) / 2
			if gap := ts[n].Sub(ts[n-1]); gap < floor-5*time.Millisecond {
				t.Errorf("event %s: retry %d came %s after the failure, before its backoff floor %s", key, n, gap, floor)
			}
		}
		if len(ts) >= 3 && len(spaced) < 3 {
			var gaps []string
			for n := 1; n < len(ts); n++ {
				gaps = append(gaps, ts[n].Sub(ts[n-1]).Round(time.Millisecond).String())
			}
			spaced = append(spaced, fmt.Sprintf("%d tries, gaps %s", len(ts), strings.Join(gaps, " ")))
		}
	}
	t.Logf("receiver down: %d requests for %d events (one probe per poll, the rest of each batch given back); then %d more requests to deliver all; examples: %s",
		downRequests, len(ids), requests-downRequests, strings.Join(spaced, "; "))
}

// TestWebhookStatusPolicy pins the status policy of docs/events.md: 2xx is
// delivered; 408, 429, 5xx and a timeout are retried until the attempts run
// out; any other status is permanent and the event is dead at once.
func TestWebhookStatusPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		answer   int
		state    string
		attempts int
	}{
		{200, "delivered", 1}, {201, "delivered", 1}, {204, "delivered", 1},
		{302, "dead", 1}, {400, "dead", 1}, {401, "dead", 1}, {403, "dead", 1}, {404, "dead", 1},
		{409, "dead", 1}, {410, "dead", 1}, {422, "dead", 1},
		{408, "dead", 3}, {429, "dead", 3}, {500, "dead", 3}, {502, "dead", 3}, {503, "dead", 3},
		{hang, "dead", 3},
	}
	pool := testkit.GuardedPool(t)
	rcv := newReceiver(t, func(_ string, _ int, data map[string]any) int {
		return int(data["answer"].(float64))
	})
	for _, c := range cases {
		seedEvents(t, pool, 1, fmt.Sprintf(`{"answer": %d}`, c.answer))
	}
	cfg := fastConfig(rcv.srv.URL)
	// The timeout is long enough that no answering receiver meets it on a
	// busy machine (3 s, a hundred times a local answer); the hanging one
	// always does.
	cfg.MaxAttempts, cfg.HTTPTimeout, cfg.ClaimTimeout = 3, 3*time.Second, 10*time.Second
	d, reg := newDispatcher(t, pool, cfg)
	stop := start(d)
	testkit.WaitFor(t, 2*time.Minute, "every event finished", func() bool {
		return testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE state IN ('pending', 'claimed')`) == 0
	})
	stop()
	rcv.checkShape(t)
	for _, c := range cases {
		var state, lastErr string
		var attempts int
		err := pool.QueryRow(context.Background(), `SELECT state, attempts, coalesce(last_error, '') FROM outbox_events WHERE (payload->>'answer')::int = $1`,
			c.answer).Scan(&state, &attempts, &lastErr)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprint(c.answer)
		if c.answer == hang {
			name = "timeout"
		}
		if state != c.state || attempts != c.attempts {
			t.Errorf("%s: %s after %d attempts, want %s after %d (last_error %q)", name, state, attempts, c.state, c.attempts, lastErr)
		}
		if state == "dead" && lastErr == "" {
			t.Errorf("%s: dead without last_error", name)
		}
		t.Logf("%-8s -> %s after %d attempt(s); last_error %q", name, state, attempts, lastErr)
	}
	if dead := testkit.Metric(t, reg, "ordersvc_outbox_dead_total"); dead != 14 {
		t.Errorf("dead_total = %v, want 14", dead)
	}
	if p := testkit.Metric(t, reg, "ordersvc_outbox_failed_total", "kind", "permanent"); p != 8 {
		t.Errorf("failed_total{kind=permanent} = %v, want 8", p)
	}

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		pool := testkit.GuardedPool(t)
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		seedEvents(t, pool, 1, `{}`)
		cfg := fastConfig(gone.URL)
		cfg.MaxAttempts = 3
		d, _ := newDispatcher(t, pool, cfg)
		stop := start(d)
		testkit.WaitFor(t, 15*time.Second, "the event dead", func() bool { return testkit.OutboxStates(t, pool)["dead"] == 1 })
		stop()
		var lastErr string
		var attempts int
		if err := pool.QueryRow(context.Background(), `SELECT attempts, last_error FROM outbox_events`).Scan(&attempts, &lastErr); err != nil {
			t.Fatal(err)
		}
		if attempts != 3 || !strings.Contains(lastErr, "refused") {
			t.Errorf("dead after %d attempts with %q, want 3 attempts and a connection error", attempts, lastErr)
		}
	})
}

// TestDeadEventRequeued: a receiver that always fails sends the event dead
// after MaxAttempts; `api outbox dead` lists it and `api outbox requeue`
// makes it deliverable again.
func TestDeadEventRequeued(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	rcv := newReceiver(t, always(http.StatusInternalServerError))
	ids := seedEvents(t, pool, 1, `{"sku": "MUG"}`)
	cfg := fastConfig(rcv.srv.URL)
	cfg.MaxAttempts = 4
	d, reg := newDispatcher(t, pool, cfg)
	stop := start(d)
	testkit.WaitFor(t, 15*time.Second, "the event dead", func() bool { return testkit.OutboxStates(t, pool)["dead"] == 1 })
	stop()
	admin := outbox.NewOutboxAdmin(pool)
	ctx := context.Background()
	dead, err := admin.Dead(ctx, uuid.Nil, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead events: %v, %v", dead, err)
	}
	if dead[0].ID.String() != ids[0] || dead[0].Attempts != 4 || !strings.Contains(dead[0].LastError, "500") || !strings.Contains(string(dead[0].Data), "MUG") {
		t.Errorf("dead event: %+v", dead[0])
	}
	if m := testkit.Metric(t, reg, "ordersvc_outbox_dead_total"); m != 1 {
		t.Errorf("dead_total = %v, want 1", m)
	}
	if ok, err := admin.Requeue(ctx, uuid.New()); ok || err != nil {
		t.Errorf("requeue of an unknown id: %v, %v", ok, err)
	}

	rcv.setAnswer(always(http.StatusAccepted))
	if ok, err := admin.Requeue(ctx, dead[0].ID); !ok || err != nil {
		t.Fatalf("requeue: %v, %v", ok, err)
	}
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE state = 'pending' AND attempts = 0 AND available_at <= now()`); n != 1 {
		t.Fatalf("requeued event is not pending, untried and due")
	}
	d, _ = newDispatcher(t, pool, cfg)
	stop = start(d)
	testkit.WaitFor(t, 15*time.Second, "the requeued event delivered", func() bool { return testkit.OutboxStates(t, pool)["delivered"] == 1 })
	stop()
	acked, _, requests := rcv.counts()
	t.Logf("always-failing receiver: dead after %d attempts; requeued; delivered; %d requests in all, %d acknowledged", cfg.MaxAttempts, requests, acked)
	if acked != 1 {
		t.Errorf("%d acknowledged, want 1", acked)
	}
	if n, err := admin.RequeueAll(ctx); n != 0 || err != nil {
		t.Errorf("requeue --all with nothing dead: %d, %v", n, err)
	}
}

// TestShutdownReleasesClaimedBatch: stopping a dispatcher while a POST is in
// flight aborts it and gives back the whole batch, untried, before Run
// returns; another dispatcher then delivers all of it.
func TestShutdownReleasesClaimedBatch(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	rcv := newReceiver(t, always(hang))
	ids := seedEvents(t, pool, 10, `{}`)
	cfg := fastConfig(rcv.srv.URL)
	cfg.HTTPTimeout, cfg.ClaimTimeout = 10*time.Second, time.Minute
	d, _ := newDispatcher(t, pool, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	<-rcv.seen // the first POST is in flight
	if st := testkit.OutboxStates(t, pool); st["claimed"] != len(ids) {
		t.Fatalf("states with a POST in flight: %v", st)
	}
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(cfg.HTTPTimeout):
		t.Fatal("the dispatcher did not stop within its HTTP timeout")
	}
	t.Logf("dispatcher stopped %s after cancel with a POST in flight", time.Since(stopped).Round(time.Microsecond))
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM outbox_events WHERE state = 'pending' AND attempts = 0`); n != len(ids) {
		t.Errorf("after shutdown %v; want all %d pending with no attempt counted", testkit.OutboxStates(t, pool), len(ids))
	}

	rcv.setAnswer(always(http.StatusOK))
	d2, _ := newDispatcher(t, pool, fastConfig(rcv.srv.URL))
	stop := start(d2)
	testkit.WaitFor(t, 15*time.Second, "the released batch delivered", func() bool { return testkit.OutboxStates(t, pool)["delivered"] == len(ids) })
	stop()
	if acked, dup, _ := rcv.counts(); acked != len(ids) || dup != 0 {
		t.Errorf("%d acknowledged, %d duplicated; want %d once each", acked, dup, len(ids))
	}
}

// TestNoWebhookMarksDelivered: without OUTBOX_WEBHOOK_URL the events are
// logged and marked delivered.
func TestNoWebhookMarksDelivered(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	seedEvents(t, pool, 5, `{}`)
	d, reg := newDispatcher(t, pool, fastConfig(""))
	if n, err := d.DispatchOnce(context.Background()); n != 5 || err != nil {
		t.Fatalf("dispatch: %d, %v", n, err)
	}
	if st := testkit.OutboxStates(t, pool); st["delivered"] != 5 {
		t.Errorf("states: %v", st)
	}
	if m := testkit.Metric(t, reg, "ordersvc_outbox_delivered_total"); m != 5 {
		t.Errorf("delivered_total = %v", m)
	}
}

// TestOldestPendingAgeGauge reads the gauge the way a scrape does.
func TestOldestPendingAgeGauge(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	_, reg := newDispatcher(t, pool, fastConfig(""))
	if age := testkit.Metric(t, reg, "ordersvc_outbox_oldest_pending_age_seconds"); age != 0 {
		t.Errorf("age with nothing pending: %v", age)
	}
	seedEvents(t, pool, 3, `{}`)
	if _, err := pool.Exec(context.Background(), `UPDATE outbox_events SET occurred_at = now() - interval '90 seconds' WHERE id = (SELECT id FROM outbox_events ORDER BY id LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE outbox_events SET state = 'delivered', occurred_at = now() - interval '1 hour' WHERE id = (SELECT id FROM outbox_events ORDER BY id DESC LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if age := testkit.Metric(t, reg, "ordersvc_outbox_oldest_pending_age_seconds"); age < 90 || age > 120 {
		t.Errorf("oldest pending age = %v, want about 90 (a delivered older event does not count)", age)
	}
}
