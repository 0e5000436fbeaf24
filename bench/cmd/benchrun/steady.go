package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// The steady-state scenarios: the outbox's drain rate and lag, a long soak
// that never truncates, and the cost of a customer's history. "steady"
// names all four.
var steadyScenarios = []string{"drain", "lag", "soak", "history"}

func isSteady(s string) bool { return slices.Contains(steadyScenarios, s) }

// Steady is what the steady-state scenarios measured.
type Steady struct {
	Drain   []Drain       `json:"drain,omitempty"`
	Lag     *Lag          `json:"lag,omitempty"`
	Soak    *Soak         `json:"soak,omitempty"`
	History *History      `json:"history,omitempty"`
	Notes   []string      `json:"notes,omitempty"`
	Sizes   []SizePerMOrd `json:"sizes_per_million_orders,omitempty"`
}

// Drain is one backlog drained by the dispatcher with nothing else running.
type Drain struct {
	Events         int     `json:"events"`
	Concurrency    int     `json:"concurrency"`
	ReceiverMillis float64 `json:"receiver_latency_ms"`
	Delivered      int64   `json:"delivered"`
	Seconds        float64 `json:"seconds"`
	PerSecond      float64 `json:"events_per_second"`
	Bound          float64 `json:"bound_per_second,omitempty"` // concurrency ÷ latency, for a slow receiver
	Truncated      bool    `json:"truncated"`
}

// Lag is the oldest undelivered event's age under the highest sustained
// placement rate (closed loop at the top concurrency).
type Lag struct {
	Concurrency int              `json:"concurrency"`
	Throughput  float64          `json:"placements_per_second"`
	Latency     load.Percentiles `json:"latency_ms"`
	MaxAge      float64          `json:"max_oldest_pending_s"`
	P50Age      float64          `json:"p50_oldest_pending_s"`
	LastAge     float64          `json:"last_oldest_pending_s"`
	Placed      int64            `json:"placed"`
	Delivered   int64            `json:"delivered_by_end"`
	Unexpected  int64            `json:"unexpected"`
	Truncated   bool             `json:"truncated"`
}

// Soak is a long run at a fixed rate, nothing truncated, in 10 s windows.
type Soak struct {
	Rate        float64          `json:"rate"`
	Peak        float64          `json:"peak"`
	Seconds     float64          `json:"seconds"`
	Env         []string         `json:"service_env"`
	Windows     []SoakWindow     `json:"windows"`
	Unexpected  int64            `json:"unexpected"`
	Invariants  *load.Invariants `json:"invariants,omitempty"`
	StartOrders int64            `json:"orders_at_start"`
}

// SoakWindow is one 10-second window of the soak.
type SoakWindow struct {
	At          float64 `json:"t_s"` // end of the window, seconds since the start
	Throughput  float64 `json:"orders_per_s"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	MaxAge      float64 `json:"max_oldest_pending_s"`
	Orders      int64   `json:"cumulative_orders"`
	OrdersBytes int64   `json:"orders_bytes"`
	KeysBytes   int64   `json:"idempotency_bytes"`
	OutboxBytes int64   `json:"outbox_bytes"`
	Unexpected  int64   `json:"unexpected"`
}

// History compares placements of one customer with a long history against
// a customer with none, in the same run.
type History struct {
	Orders      int     `json:"history_orders"`
	Concurrency int     `json:"concurrency"`
	Heavy       float64 `json:"heavy_per_s"`
	Fresh       float64 `json:"fresh_per_s"`
	HeavyP50    float64 `json:"heavy_p50_ms"`
	FreshP50    float64 `json:"fresh_p50_ms"`
	Ratio       float64 `json:"ratio"`
	Rounds      int     `json:"rounds"`
	LoadSeconds float64 `json:"bulk_load_s"`
}

// SizePerMOrd is a table's size scaled to a million orders at the end of
// the soak.
type SizePerMOrd struct {
	Table string  `json:"table"`
	Bytes int64   `json:"bytes"`
	PerM  float64 `json:"mib_per_million_orders"`
}

// receiver is the local webhook: it answers 204 after delay and records
// when the first and the last delivery arrived.
type receiver struct {
	srv         *http.Server
	url         string
	delay       atomic.Int64 // nanoseconds
	count       atomic.Int64
	mu          sync.Mutex
	first, last time.Time
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/events"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		buf := make([]byte, 4096)
		for {
			if _, err := req.Body.Read(buf); err != nil {
				break
			}
		}
		if d := time.Duration(r.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		r.mu.Lock()
		if r.first.IsZero() {
			r.first = now
		}
		r.last = now
		r.mu.Unlock()
		r.count.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) reset(delay time.Duration) {
	r.delay.Store(int64(delay))
	r.count.Store(0)
	r.mu.Lock()
	r.first, r.last = time.Time{}, time.Time{}
	r.mu.Unlock()
}

func (r *receiver) span() (first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.last
}

// steady runs one steady-state scenario.
func (e *env) steady(ctx context.Context, s string) error {
	if e.res.Steady == nil {
		e.res.Steady = &Steady{}
	}
	if e.rcv == nil {
		r, err := startReceiver()
		if err != nil {
			return err
		}
		e.rcv = r
	}
	switch s {
	case "drain":
		return e.drain(ctx)
	case "lag":
		return e.lag(ctx)
	case "soak":
		return e.soak(ctx)
	case "history":
		return e.history(ctx)
	}
	return fmt.Errorf("unknown steady scenario %q", s)
}

// withAPI (re)starts the service with the dispatcher on, delivering to the
// local receiver, plus env.
func (e *env) withAPI(ctx context.Context, mode string, env ...string) error {
	e.stopAPI()
	e.steadyEnv = append([]string{"OUTBOX_WEBHOOK_URL=" + e.rcv.url}, env...)
	defer func() { e.steadyEnv = nil }()
	return e.ensureAPI(ctx, "steady-"+mode, "")
}

// seedBacklog inserts n pending events shaped like order.placed.
func (e *env) seedBacklog(ctx context.Context, n int) error {
	_, err := e.conn.Exec(ctx, `
		INSERT INTO outbox_events (id, type, aggregate_id, payload)
		SELECT bench_uuidv7(), 'order.placed', gen_random_uuid(), jsonb_build_object(
		  'id', gen_random_uuid(), 'customer_id', gen_random_uuid(), 'status', 'placed',
		  'lines', jsonb_build_array(jsonb_build_object('product_id', bench_pid(1 + g % 10000), 'quantity', 1, 'unit_price_cents', 500)),
		  'total_cents', 500, 'paid_cents', 0, 'created_at', now(), 'updated_at', now())
		FROM generate_series(1, $1::int) g`, n)
	if err == nil {
		_, err = e.conn.Exec(ctx, `VACUUM ANALYZE outbox_events`)
	}
	return err
}

func (e *env) undelivered(ctx context.Context) (n int64, age float64, err error) {
	err = e.conn.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(occurred_at)), 0)::float8
		FROM outbox_events WHERE state IN ('pending', 'claimed')`).Scan(&n, &age)
	return n, age, err
}

// drain: a backlog of -drain-events pending events and nothing else
// running; the dispatcher at OUTBOX_CONCURRENCY 1 and 16 with a receiver
// that answers at once (every event), then at 4 and 16 with a receiver that
// takes 50 ms (events in -duration). Truncates before each run.
func (e *env) drain(ctx context.Context) error {
	cases := []struct {
		conc  int
		delay time.Duration
	}{{16, 0}, {1, 0}, {4, 50 * time.Millisecond}, {16, 50 * time.Millisecond}}
	for _, c := range cases {
		e.stopAPI()
		if err := load.Reset(ctx, e.conn); err != nil {
			return err
		}
		if err := e.seedBacklog(ctx, e.o.drainEvents); err != nil {
			return fmt.Errorf("drain backlog: %w", err)
		}
		e.waitQuiet(ctx)
		e.rcv.reset(c.delay)
		if err := e.withAPI(ctx, fmt.Sprintf("drain-c%d", c.conc), fmt.Sprintf("OUTBOX_CONCURRENCY=%d", c.conc)); err != nil {
			return err
		}
		d := Drain{Events: e.o.drainEvents, Concurrency: c.conc, ReceiverMillis: float64(c.delay.Milliseconds()), Truncated: true}
		if c.delay > 0 {
			d.Bound = float64(c.conc) / c.delay.Seconds()
			// A slow receiver: count what arrives in -duration after the first.
			for e.rcv.count.Load() == 0 && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			first, _ := e.rcv.span()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(e.o.duration):
			}
			d.Seconds = time.Since(first).Seconds()
			d.Delivered = e.rcv.count.Load() - 1 // the first opened the window
			d.PerSecond = float64(d.Delivered) / d.Seconds
		} else {
			deadline := time.Now().Add(10 * time.Minute)
			for {
				n, _, err := e.undelivered(ctx)
				if err != nil {
					return err
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("drain at concurrency %d: %d events still undelivered after 10 minutes", c.conc, n)
				}
				time.Sleep(50 * time.Millisecond)
			}
			first, last := e.rcv.span()
			d.Delivered = e.rcv.count.Load()
			d.Seconds = last.Sub(first).Seconds()
			d.PerSecond = float64(d.Delivered-1) / d.Seconds
		}
		log.Printf("drain: %d events, OUTBOX_CONCURRENCY=%d, receiver %s: %d delivered in %.1fs = %.0f events/s",
			d.Events, d.Concurrency, c.delay, d.Delivered, d.Seconds, d.PerSecond)
		e.res.Steady.Drain = append(e.res.Steady.Drain, d)
	}
	e.stopAPI()
	return nil
}

// sampleAge reads the oldest undelivered event's age every second until
// stop is closed; max and the samples are returned by the returned func.
func (e *env) sampleAge(ctx context.Context, dsn string) (stop func() []float64) {
	done := make(chan struct{})
	var mu sync.Mutex
	var ages []float64
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := connect(ctx, dsn)
		if err != nil {
			log.Printf("age sampler: %v", err)
			return
		}
		defer conn.Close(context.Background())
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var age float64
			if err := conn.QueryRow(ctx, `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(occurred_at)), 0)::float8
				FROM outbox_events WHERE state IN ('pending', 'claimed')`).Scan(&age); err == nil {
				mu.Lock()
				ages = append(ages, age)
				mu.Unlock()
			}
		}
	})
	return func() []float64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return ages
	}
}

// lag: closed-loop spread placements at the top concurrency, the
// dispatcher and the receiver on; the oldest undelivered event's age
// sampled every second. Truncates before the run.
func (e *env) lag(ctx context.Context) error {
	c := e.o.concurrency[len(e.o.concurrency)-1]
	e.stopAPI()
	if err := load.Reset(ctx, e.conn); err != nil {
		return err
	}
	e.waitQuiet(ctx)
	e.rcv.reset(0)
	if err := e.withAPI(ctx, "lag"); err != nil {
		return err
	}
	cfg := e.loadConfig("spread", c, 0)
	var stopAges func() []float64
	cfg.OnMeasure = func(open bool) {
		if open {
			stopAges = e.sampleAge(ctx, e.o.dbURL)
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var ages []float64
	if stopAges != nil {
		ages = stopAges()
	}
	l := &Lag{Concurrency: c, Throughput: r.Throughput(), Latency: r.Latency, Placed: r.FreshOrdersTotal, Unexpected: r.Unexpected, Truncated: true}
	if len(ages) > 0 {
		l.MaxAge, l.LastAge = slices.Max(ages), ages[len(ages)-1]
		s := slices.Clone(ages)
		sort.Float64s(s)
		l.P50Age = s[len(s)/2]
	}
	_ = e.conn.QueryRow(ctx, `SELECT count(*) FROM outbox_events WHERE state = 'delivered'`).Scan(&l.Delivered)
	log.Printf("lag: spread c=%d %.0f placements/s; oldest undelivered event max %.2fs p50 %.2fs last %.2fs; %d of %d events delivered by the end",
		c, l.Throughput, l.MaxAge, l.P50Age, l.LastAge, l.Delivered, l.Placed)
	e.res.Steady.Lag = l
	e.stopAPI()
	return nil
}

// soakEnv is the service's configuration during the soak: short TTL and
// retention, so that the purge and the retention work during the run.
func (e *env) soakEnv() []string {
	return []string{"IDEMPOTENCY_TTL=" + e.o.soakTTL.String(), "OUTBOX_RETENTION=" + e.o.soakTTL.String(), "CLEANUP_INTERVAL=10s"}
}

// soak: open-loop spread placements at -soak-fraction of the peak for
// -soak, the dispatcher and the receiver on, nothing truncated, in
// back-to-back 10-second windows.
func (e *env) soak(ctx context.Context) error {
	peak := 0.0
	if e.res.Steady.Lag != nil {
		peak = e.res.Steady.Lag.Throughput
	}
	e.rcv.reset(0)
	env := e.soakEnv()
	if err := e.withAPI(ctx, "soak", env...); err != nil {
		return err
	}
	if peak == 0 {
		// No lag run to take the peak from: measure it, without truncating.
		cfg := e.loadConfig("spread", e.o.concurrency[len(e.o.concurrency)-1], 0)
		r, err := load.Run(ctx, cfg)
		if err != nil {
			return err
		}
		peak = r.Throughput()
	}
	rate := math.Round(peak * e.o.soakFraction)
	if e.o.soakRate > 0 {
		rate = e.o.soakRate
	}
	s := &Soak{Rate: rate, Peak: peak, Env: env}
	if err := e.conn.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&s.StartOrders); err != nil {
		return err
	}
	log.Printf("soak: %.0f placements/s (%.0f%% of the %.0f/s peak) for %s, nothing truncated; %s", rate, 100*rate/peak, peak, e.o.soak, env)
	const window = 10 * time.Second
	began := time.Now()
	orders := s.StartOrders
	var fresh, uncertain int64
	for time.Since(began) < e.o.soak && ctx.Err() == nil {
		cfg := e.loadConfig("spread", 0, rate)
		cfg.Warmup, cfg.Duration = 0, window
		stopAges := e.sampleAge(ctx, e.o.dbURL)
		r, err := load.Run(ctx, cfg)
		ages := stopAges()
		if err != nil {
			return err
		}
		fresh += r.FreshOrdersTotal
		uncertain += r.UncertainKeys
		orders += r.FreshOrdersTotal
		w := SoakWindow{At: time.Since(began).Seconds(), Throughput: r.Throughput(), P50: r.Latency.P50, P99: r.Latency.P99,
			Orders: orders, Unexpected: r.Unexpected}
		if len(ages) > 0 {
			w.MaxAge = slices.Max(ages)
		}
		_ = e.conn.QueryRow(ctx, `SELECT pg_total_relation_size('orders') + pg_total_relation_size('order_lines'),
			pg_total_relation_size('idempotency_keys'), pg_total_relation_size('outbox_events')`).Scan(&w.OrdersBytes, &w.KeysBytes, &w.OutboxBytes)
		s.Unexpected += r.Unexpected
		s.Windows = append(s.Windows, w)
		log.Printf("soak %5.0fs: %6.0f/s p50 %6.2f p99 %7.2f ms, oldest pending %.2fs, %d orders; MiB orders %.1f keys %.1f outbox %.1f",
			w.At, w.Throughput, w.P50, w.P99, w.MaxAge, w.Orders, mib(w.OrdersBytes), mib(w.KeysBytes), mib(w.OutboxBytes))
	}
	s.Seconds = time.Since(began).Seconds()
	inv, err := load.CheckSteady(ctx, e.conn)
	if err != nil {
		return err
	}
	s.Invariants = &inv
	if !inv.OK() || s.Unexpected > 0 {
		e.res.Failed = true
	}
	if n := len(s.Windows); n > 0 {
		last := s.Windows[n-1]
		total := float64(last.Orders)
		for _, t := range []struct {
			name  string
			bytes int64
		}{{"orders + order_lines", last.OrdersBytes}, {"idempotency_keys", last.KeysBytes}, {"outbox_events", last.OutboxBytes}} {
			e.res.Steady.Sizes = append(e.res.Steady.Sizes, SizePerMOrd{Table: t.name, Bytes: t.bytes, PerM: mib(t.bytes) / total * 1e6})
		}
	}
	e.res.Steady.Soak = s
	e.stopAPI()
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// history: one customer with -history-orders orders of history (bulk
// loaded: shipped and fully paid, the orders' rows only, which is what the
// credit check reads), then closed-loop placements for that customer and
// for a customer with no orders, alternated, in the same run. Nothing
// truncated.
func (e *env) history(ctx context.Context) error {
	if len(e.historyActors) < 2 {
		return fmt.Errorf("history needs two dedicated customers (-history-customers)")
	}
	heavy, fresh := e.historyActors[0], e.historyActors[1]
	h := &History{Orders: e.o.historyOrders, Concurrency: 8, Rounds: 2}
	var have int
	if err := e.conn.QueryRow(ctx, `SELECT count(*) FROM orders WHERE customer_id = $1`, heavy.ID).Scan(&have); err != nil {
		return err
	}
	t0 := time.Now()
	if have < e.o.historyOrders {
		if _, err := e.conn.Exec(ctx, `
			INSERT INTO orders (id, customer_id, status, total_cents, paid_cents, created_at, updated_at)
			SELECT bench_uuidv7(), $1, 'shipped', 500 + g % 1000, 500 + g % 1000,
			       now() - interval '400 days' + g * interval '5 minutes', now() - interval '400 days' + g * interval '5 minutes'
			FROM generate_series(1, $2::int) g`, heavy.ID, e.o.historyOrders-have); err != nil {
			return fmt.Errorf("history bulk load: %w", err)
		}
		if _, err := e.conn.Exec(ctx, `VACUUM ANALYZE orders`); err != nil {
			return err
		}
	}
	h.LoadSeconds = time.Since(t0).Seconds()
	if err := e.withAPI(ctx, "history"); err != nil {
		return err
	}
	var heavyRate, freshRate, heavyP50, freshP50 []float64
	for round := 0; round < h.Rounds; round++ {
		for _, who := range []load.Actor{fresh, heavy} {
			e.waitQuiet(ctx)
			cfg := e.loadConfig("spread", h.Concurrency, 0)
			cfg.Customers = []load.Actor{who}
			r, err := load.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if r.Unexpected > 0 {
				e.res.Failed = true
				e.res.Steady.Notes = append(e.res.Steady.Notes, fmt.Sprintf("history: %d unexpected responses, e.g. %v", r.Unexpected, r.Examples))
			}
			if who == heavy {
				heavyRate, heavyP50 = append(heavyRate, r.Throughput()), append(heavyP50, r.Latency.P50)
			} else {
				freshRate, freshP50 = append(freshRate, r.Throughput()), append(freshP50, r.Latency.P50)
			}
			log.Printf("history round %d: %s customer %.0f placements/s p50 %.2f ms", round+1,
				map[bool]string{true: "heavy", false: "fresh"}[who == heavy], r.Throughput(), r.Latency.P50)
		}
	}
	h.Heavy, h.Fresh, h.HeavyP50, h.FreshP50 = mean(heavyRate), mean(freshRate), mean(heavyP50), mean(freshP50)
	if h.Fresh > 0 {
		h.Ratio = h.Heavy / h.Fresh
	}
	log.Printf("history: %d orders of history: %.0f/s vs %.0f/s for a fresh customer: ratio %.2f", h.Orders, h.Heavy, h.Fresh, h.Ratio)
	e.res.Steady.History = h
	e.stopAPI()
	return nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) }
