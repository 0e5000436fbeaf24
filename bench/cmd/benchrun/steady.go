package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The steady-state scenarios: the outbox's drain rate and lag, a long soak
// that never truncates, and the cost of a customer's history. "steady"
// names all four.
var steadyScenarios = []string{"drain", "lag", "soak", "history"}

func isSteady(s string) bool { return slices.Contains(steadyScenarios, s) }

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
