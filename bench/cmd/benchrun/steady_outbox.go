package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

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
