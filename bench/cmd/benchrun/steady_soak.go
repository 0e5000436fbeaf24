package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"slices"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

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
