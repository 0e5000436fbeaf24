// Package outbox delivers the events that use cases append to the outbox
// table (store's outboxRepo, in their transactions): the Dispatcher claims
// due events, POSTs them to the webhook, signed (Standard Webhooks), and
// records each outcome; OutboxAdmin backs `api outbox`. It runs statements
// on the pool, each on its own, and holds no transaction (ADR 0024).
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// Dispatcher delivers outbox events: it claims due events in batches with
// FOR UPDATE SKIP LOCKED (pattern 5) and commits the claim, then, outside any
// transaction, POSTs the batch's events to the webhook, up to Concurrency at
// once, and records the outcomes with updates guarded by the claim: each
// failure as it comes, every accepted event of the batch in one statement.
// Any number of dispatchers, in one process
// or in several replicas, can run at once: a claimed event is invisible to
// every other claim until its owner finishes or releases it or the reaper
// takes it back. Delivery is at least once; see docs/events.md.
//
// Patterns and rule ids: docs/patterns.md.
type Dispatcher struct {
	// pool runs each statement on its own. The dispatcher's statements
	// are bounded by its own contexts (finishTimeout, the claim timeout),
	// so they carry no guard statement.
	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	log     *slog.Logger
	cfg     OutboxConfig
	sink    sink
	metrics *outboxMetrics
	tracer  trace.Tracer // nil: tracing is off
	// mark records accepted deliveries; markFenced, except in the test
	// that shows what an unfenced mark breaks.
	mark func(ctx context.Context, ids []uuid.UUID, claimedAt pgtype.Timestamptz) (int64, error)
}

// NewDispatcher returns a dispatcher. Its metrics are registered on reg,
// when reg is not nil.
func NewDispatcher(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, cfg OutboxConfig) *Dispatcher {
	cfg.defaults()
	d := &Dispatcher{pool: pool.Pool, q: dbsqlc.New(), log: log, cfg: cfg, metrics: newOutboxMetrics(pool.Pool)}
	d.mark = d.markFenced
	if cfg.TracerProvider != nil {
		d.tracer = cfg.TracerProvider.Tracer(postgres.TracerName)
	}
	if cfg.WebhookURL == "" {
		d.sink = logSink{log: log}
	} else {
		d.sink = newWebhook(cfg.WebhookURL, cfg.HTTPTimeout, cfg.Concurrency, cfg.Secrets)
	}
	if reg != nil {
		d.metrics.register(reg)
	}
	return d
}

// Run dispatches until ctx ends, in the loop every background service has
// (maintenance.Loop): a round at once, then after PollInterval, or at once
// again after a full batch. It returns once the dispatcher holds no
// claim: an event whose POST was cut short by the shutdown, and the events of
// its batch not yet tried, are released to pending, their attempt not
// counted, for another replica or the next start to deliver.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.sink.close()
	d.metrics.running.Set(1)
	defer d.metrics.running.Set(0)
	d.logStart()
	reap := d.reaper()
	maintenance.Loop(ctx, func(ctx context.Context) time.Duration {
		reap(ctx)
		return d.round(ctx)
	})
	d.log.Info("outbox dispatcher stopped")
}

// logStart says where the events go, and warns when they go unsigned.
func (d *Dispatcher) logStart() {
	where := d.cfg.WebhookURL
	if where == "" {
		where = "the log (OUTBOX_WEBHOOK_URL=log: events are marked delivered, never sent)"
	}
	d.log.Info("outbox dispatcher started", "target", redactURL(where), "batch", d.cfg.BatchSize,
		"concurrency", d.cfg.Concurrency, "poll", d.cfg.PollInterval, "signing_keys", len(d.cfg.Secrets))
	if d.cfg.WebhookURL != "" && len(d.cfg.Secrets) == 0 {
		d.log.Warn("outbox deliveries are unsigned: set OUTBOX_WEBHOOK_SECRET so that the receiver can refuse forged or replayed events")
	}
}

// reaper returns a round's first step: Reap, at most once per quarter of
// ClaimTimeout (and never more often than PollInterval). Reap releases
// the claims older than ClaimTimeout, so a claim whose dispatcher died goes
// back to pending at most a quarter of ClaimTimeout after it expired.
func (d *Dispatcher) reaper() func(context.Context) {
	every := max(d.cfg.ClaimTimeout/4, d.cfg.PollInterval)
	var last time.Time
	return func(ctx context.Context) {
		if time.Since(last) < every {
			return
		}
		if _, err := d.Reap(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("outbox reaper", "err", err)
		}
		last = time.Now()
	}
}

// round claims and delivers one batch and says when the next is due: at
// once after a full batch that went out whole (more may be due), else after
// PollInterval.
func (d *Dispatcher) round(ctx context.Context) time.Duration {
	r, err := d.dispatch(ctx)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("outbox dispatch", "err", err)
	}
	if err == nil && r.claimed == d.cfg.BatchSize && !r.cut {
		return 0
	}
	return d.cfg.PollInterval
}

// Delivery is one claimed outbox event on its way to the receiver: the
// stored event and how often it was tried. (app.Event is what a use case
// appends; outboxRepo stores it.)
type Delivery struct {
	ID          uuid.UUID
	Type        string
	AggregateID uuid.UUID
	OccurredAt  time.Time
	Data        json.RawMessage
	Attempts    int // including the current one
}

// Claim is a batch of events taken by one claim. Its events are the
// dispatcher's to finish until the claim expires.
type Claim struct {
	Events []Delivery
	at     pgtype.Timestamptz // claimed_at: identifies the claim in every guarded update
	start  time.Time          // local time before the claim was sent; never later than claimed_at
}

// Claim takes up to BatchSize due events, oldest first, and commits the
// claim. It is exported so that tests can play a dispatcher that dies
// between claiming and delivering.
//
// The statement runs to its end even when ctx is cancelled meanwhile: a
// claim that committed on the server while the client gave up would be
// orphaned until the reaper. The caller sees the cancellation in deliver and
// releases the claim at once.
func (d *Dispatcher) Claim(ctx context.Context) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	start := time.Now()
	rows, err := d.q.OutboxClaim(qctx, d.pool, int32(d.cfg.BatchSize))
	if err != nil {
		return Claim{}, fmt.Errorf("claim: %w", postgres.Translate(err))
	}
	c := Claim{start: start, Events: make([]Delivery, len(rows))}
	slices.SortFunc(rows, func(a, b dbsqlc.OutboxClaimRow) int {
		if n := a.AvailableAt.Compare(b.AvailableAt); n != 0 {
			return n
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	for i, r := range rows {
		c.at = r.ClaimedAt // one statement, one now(): the same for every row
		c.Events[i] = Delivery{ID: r.ID, Type: r.Type, AggregateID: r.AggregateID, OccurredAt: r.OccurredAt, Data: r.Payload, Attempts: int(r.Attempts)}
	}
	return c, nil
}

// DispatchOnce claims one batch and delivers it. It returns how many events
// it claimed.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	r, err := d.dispatch(ctx)
	return r.claimed, err
}

type round struct {
	claimed int
	cut     bool // the batch was not worked to its end
}

func (d *Dispatcher) dispatch(ctx context.Context) (round, error) {
	c, err := d.Claim(ctx)
	if err != nil || len(c.Events) == 0 {
		return round{}, err
	}
	cut, err := d.deliver(ctx, c)
	return round{claimed: len(c.Events), cut: cut}, err
}
