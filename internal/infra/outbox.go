package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// OutboxConfig sets the dispatcher's behaviour. Zero values take the
// defaults in brackets, which are also the defaults of the OUTBOX_*
// environment variables.
type OutboxConfig struct {
	// WebhookURL receives each event as a POST. Empty: events are logged
	// and marked delivered (OUTBOX_WEBHOOK_URL=log, for demos). A process
	// whose OUTBOX_WEBHOOK_URL is unset builds a dispatcher for its metrics
	// but never runs it (cmd/api).
	WebhookURL string
	// PollInterval is the pause between claims when no full batch was due [500ms].
	PollInterval time.Duration
	// BatchSize is how many due events one claim takes [100].
	BatchSize int
	// Concurrency bounds the deliveries of one batch that are in flight at
	// once [16]. Throughput with a receiver that takes L per request is at
	// most Concurrency / L.
	Concurrency int
	// Secrets sign each delivery (Standard Webhooks), one signature per
	// key; none: deliveries are unsigned. See ParseWebhookSecrets.
	Secrets [][]byte
	// MaxAttempts is how many failed deliveries make an event dead [20].
	MaxAttempts int
	// ClaimTimeout is how long a claim may stay unfinished before the reaper
	// gives its events back [1m]. A live dispatcher stops using a claim
	// before that (see deliver), so it must exceed 2 × HTTPTimeout.
	ClaimTimeout time.Duration
	// HTTPTimeout bounds one POST, response included [10s].
	HTTPTimeout time.Duration
	// BackoffBase and BackoffMax shape the retry delay after the n-th failed
	// attempt: min(BackoffMax, BackoffBase × 2^(n-1)), of which a random
	// half is added to the other half ("equal jitter") [1s, 15m].
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// TracerProvider, when set, records each delivery as a span of its own
	// whose context the webhook request carries (traceparent). Nil: no
	// spans, no traceparent.
	TracerProvider trace.TracerProvider
}

func (c *OutboxConfig) defaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 20
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = 10 * time.Second
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = time.Minute
	}
	if c.ClaimTimeout < 2*c.HTTPTimeout {
		c.ClaimTimeout = 2 * c.HTTPTimeout
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 15 * time.Minute
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
}

// finishTimeout bounds every statement of the dispatcher: the claim, the
// reaper's, and those that record a delivery's outcome. Behind PgBouncer
// while PostgreSQL is down, a statement waits in PgBouncer's queue and no
// server-side timeout runs; this deadline ends it. The outcomes' statements
// run on a context that survives shutdown, so that an outcome already known
// is not lost when the dispatcher is stopped.
const finishTimeout = 5 * time.Second

// Dispatcher delivers outbox events: it claims due events in batches with
// FOR UPDATE SKIP LOCKED (pattern 5) and commits the claim, then, outside any
// transaction, POSTs the batch's events to the webhook, up to Concurrency at
// once, and records the outcomes with updates guarded by the claim: each
// failure as it comes, every accepted event of the batch in one statement.
// Any number of dispatchers, in one process
// or in several replicas, can run at once: a claimed event is invisible to
// every other claim until its owner finishes or releases it or the reaper
// takes it back. Delivery is at least once; see docs/events.md.
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
func NewDispatcher(pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer, cfg OutboxConfig) *Dispatcher {
	cfg.defaults()
	d := &Dispatcher{pool: pool, q: dbsqlc.New(), log: log, cfg: cfg, metrics: newOutboxMetrics(pool)}
	d.mark = d.markFenced
	if cfg.TracerProvider != nil {
		d.tracer = cfg.TracerProvider.Tracer(tracerName)
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

// Run dispatches until ctx ends. It returns once the dispatcher holds no
// claim: an event whose POST was cut short by the shutdown, and the events of
// its batch not yet tried, are released to pending, their attempt not
// counted, for another replica or the next start to deliver.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.sink.close()
	d.metrics.running.Set(1)
	defer d.metrics.running.Set(0)
	where := d.cfg.WebhookURL
	if where == "" {
		where = "the log (OUTBOX_WEBHOOK_URL=log: events are marked delivered, never sent)"
	}
	d.log.Info("outbox dispatcher started", "target", redactURL(where), "batch", d.cfg.BatchSize,
		"concurrency", d.cfg.Concurrency, "poll", d.cfg.PollInterval, "signing_keys", len(d.cfg.Secrets))
	if d.cfg.WebhookURL != "" && len(d.cfg.Secrets) == 0 {
		d.log.Warn("outbox deliveries are unsigned: set OUTBOX_WEBHOOK_SECRET so that the receiver can refuse forged or replayed events")
	}
	reapEvery := max(d.cfg.ClaimTimeout/4, d.cfg.PollInterval)
	var lastReap time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			d.log.Info("outbox dispatcher stopped")
			return
		case <-timer.C:
		}
		if time.Since(lastReap) >= reapEvery {
			if _, err := d.Reap(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("outbox reaper", "err", err)
			}
			lastReap = time.Now()
		}
		r, err := d.dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("outbox dispatch", "err", err)
		}
		wait := d.cfg.PollInterval
		if err == nil && r.claimed == d.cfg.BatchSize && !r.cut {
			wait = 0 // a full batch went out: more may be due
		}
		timer.Reset(wait)
	}
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
		return Claim{}, fmt.Errorf("claim: %w", translate(err))
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

// Deliver sends a claim's events and records each outcome; see deliver. With
// Claim, it is the two halves of DispatchOnce, exported so that tests can
// play a dispatcher that stalls between them.
func (d *Dispatcher) Deliver(ctx context.Context, c Claim) error {
	_, err := d.deliver(ctx, c)
	return err
}

// deliver sends the claim's events, at most Concurrency at a time, records
// each failure as it comes, and marks every event the receiver accepted
// delivered in one statement at the end. It stops starting new POSTs,
// releasing the events not yet tried, when
//   - ctx ends (shutdown): the POSTs in flight are abandoned and released too;
//   - the claim is about to expire: a POST started now could still be
//     running when the reaper gives the event to another dispatcher;
//   - a delivery fails transiently: the one receiver is unwell, and the next
//     poll probes it again instead of spending the batch on it.
//
// An accepted event is marked only when the batch ends: a dispatcher that
// dies in between leaves it claimed, and the reaper gives it back to be
// sent again, as for any delivery whose outcome was not recorded
// (at least once). No POST starts after safeUntil and each ends within
// HTTPTimeout, so the mark goes out before the claim expires.
func (d *Dispatcher) deliver(ctx context.Context, c Claim) (cut bool, err error) {
	finish := context.WithoutCancel(ctx)
	safeUntil := c.start.Add(d.cfg.ClaimTimeout - d.cfg.HTTPTimeout - d.cfg.ClaimTimeout/10)
	var (
		mu        sync.Mutex
		accepted  []uuid.UUID
		abandoned []Delivery // in flight when ctx ended: released untried
		failed    bool       // a transient failure: start nothing more
		errs      []error
		wg        sync.WaitGroup
	)
	slots := make(chan struct{}, d.cfg.Concurrency)
	next := 0
	for ; next < len(c.Events); next++ {
		slots <- struct{}{} // wait for a free slot before deciding to start
		mu.Lock()
		stop := failed || len(errs) > 0
		mu.Unlock()
		if stop || ctx.Err() != nil || time.Now().After(safeUntil) {
			<-slots
			break
		}
		ev := c.Events[next]
		wg.Go(func() {
			defer func() { <-slots }()
			sctx, span := d.startDelivery(ctx, ev)
			res := d.sink.send(sctx, ev)
			defer endDelivery(span, res)
			switch {
			case res.ok:
				mu.Lock()
				accepted = append(accepted, ev.ID)
				mu.Unlock()
			case ctx.Err() != nil:
				mu.Lock()
				abandoned = append(abandoned, ev)
				mu.Unlock()
			default:
				fctx := finish
				if span != nil {
					fctx = trace.ContextWithSpan(finish, span) // the outcome's record is part of the delivery's trace
				}
				err := d.fail(fctx, c, ev, res)
				mu.Lock()
				failed = failed || !res.permanent
				if err != nil {
					// The outcome could not be recorded; the reaper will
					// give the event back after the claim timeout.
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cut = next < len(c.Events) || len(abandoned) > 0 || failed || len(errs) > 0
	errs = append(errs, d.markDelivered(finish, c, accepted))
	errs = append(errs, d.release(finish, c, append(abandoned, c.Events[next:]...)))
	return cut, errors.Join(errs...)
}

// startDelivery starts the span of one delivery attempt, when tracing is
// on. It is the root of a trace of its own: the event was committed by a
// request whose trace ended long before, and linking to it would mean
// keeping that request's trace context in the outbox row (ADR 0012). The
// webhook request carries this span's context as traceparent, so that the
// receiver's trace continues the delivery's.
func (d *Dispatcher) startDelivery(ctx context.Context, ev Delivery) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	return d.tracer.Start(ctx, "deliver "+ev.Type, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingOperationTypeSend,
			semconv.MessagingMessageID(ev.ID.String()),
			attribute.String("outbox.event.type", ev.Type),
			attribute.String("outbox.event.aggregate_id", ev.AggregateID.String()),
			attribute.Int("outbox.event.attempt", ev.Attempts),
		))
}

// endDelivery records the attempt's outcome on its span and ends it.
func endDelivery(span trace.Span, res result) {
	if span == nil {
		return
	}
	if !res.ok {
		span.SetAttributes(attribute.Bool("outbox.delivery.permanent", res.permanent))
		span.SetStatus(codes.Error, res.err)
	}
	span.End()
}

// markDelivered records, in one statement guarded by the claim, that the
// receiver accepted the events ids.
func (d *Dispatcher) markDelivered(ctx context.Context, c Claim, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	d.metrics.delivered.Add(float64(len(ids)))
	n, err := d.mark(ctx, ids, c.at)
	if err != nil {
		return fmt.Errorf("record %d deliveries: %w", len(ids), translate(err))
	}
	if n < int64(len(ids)) {
		d.log.Warn("outbox claim was reaped before the deliveries were recorded; those events may be delivered twice",
			"delivered", len(ids), "recorded", n, "claim_age", time.Since(c.start).Round(time.Millisecond))
	}
	d.log.Debug("outbox events delivered", "count", n)
	return nil
}

// markFenced is the production mark: only events still held by this claim.
func (d *Dispatcher) markFenced(ctx context.Context, ids []uuid.UUID, at pgtype.Timestamptz) (int64, error) {
	return d.q.OutboxMarkDelivered(ctx, d.pool, dbsqlc.OutboxMarkDeliveredParams{Ids: ids, ClaimedAt: at})
}

// fail records one failed delivery, guarded by the claim: dead at once for
// a permanent refusal, otherwise back to pending after its backoff (or dead
// when its attempts are used up).
func (d *Dispatcher) fail(ctx context.Context, c Claim, ev Delivery, res result) error {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	log := d.log.With("event_id", ev.ID, "type", ev.Type, "attempt", ev.Attempts)
	var n int64
	var err error
	if res.permanent {
		d.metrics.failed.WithLabelValues("permanent").Inc()
		n, err = d.q.OutboxMarkDead(ctx, d.pool, dbsqlc.OutboxMarkDeadParams{ID: ev.ID, ClaimedAt: c.at, LastError: res.err})
		if err == nil && n == 1 {
			d.metrics.dead.Inc()
			log.Error("outbox event dead: the receiver refused it", "err", res.err)
		}
	} else {
		d.metrics.failed.WithLabelValues("transient").Inc()
		delay := max(d.backoff(ev.Attempts), min(res.retryAfter, d.cfg.BackoffMax))
		var state string
		state, err = d.q.OutboxRetryLater(ctx, d.pool, dbsqlc.OutboxRetryLaterParams{
			ID: ev.ID, ClaimedAt: c.at, MaxAttempts: int32(d.cfg.MaxAttempts), BackoffSeconds: delay.Seconds(), LastError: res.err,
		})
		if err == nil {
			n = 1
			if state == "dead" {
				d.metrics.dead.Inc()
				log.Error("outbox event dead: attempts used up", "err", res.err)
			} else {
				log.Warn("outbox delivery failed; will retry", "err", res.err, "retry_in", delay.Round(time.Millisecond))
			}
		} else if isNoRows(err) {
			n, err = 0, nil
		}
	}
	if err != nil {
		return fmt.Errorf("record outcome of event %s: %w", ev.ID, translate(err))
	}
	if n == 0 {
		log.Warn("outbox claim was reaped before the outcome was recorded; the event may be delivered twice",
			"claim_age", time.Since(c.start).Round(time.Millisecond))
	}
	return nil
}

// release gives back events that were not attempted: pending and due at
// once, the claim's attempt not counted.
func (d *Dispatcher) release(ctx context.Context, c Claim, evs []Delivery) error {
	if len(evs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	n, err := d.q.OutboxRelease(ctx, d.pool, dbsqlc.OutboxReleaseParams{Ids: ids, ClaimedAt: c.at})
	if err != nil {
		return fmt.Errorf("release %d events: %w", len(ids), translate(err))
	}
	d.log.Debug("outbox events released", "count", n)
	return nil
}

// Reap gives back events whose claim is older than ClaimTimeout: their
// dispatcher died or stalled. An event whose attempts are used up goes dead
// instead, so that an event that crashes every dispatcher stops circulating.
func (d *Dispatcher) Reap(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout) // bounded like every statement of the dispatcher
	defer cancel()
	rows, err := d.q.OutboxReap(ctx, d.pool, dbsqlc.OutboxReapParams{
		MaxAttempts: int32(d.cfg.MaxAttempts), ClaimTimeoutSeconds: d.cfg.ClaimTimeout.Seconds(),
	})
	if err != nil {
		return 0, fmt.Errorf("reap: %w", translate(err))
	}
	for _, r := range rows {
		d.metrics.reaped.Inc()
		if r.State == "dead" {
			d.metrics.dead.Inc()
		}
	}
	if len(rows) > 0 {
		d.log.Warn("outbox reaper released expired claims", "count", len(rows))
	}
	return len(rows), nil
}

// backoff is the delay after the attempts-th failed attempt.
func (d *Dispatcher) backoff(attempts int) time.Duration {
	limit := d.cfg.BackoffMax
	if attempts < 63 {
		if b := d.cfg.BackoffBase << (attempts - 1); b > 0 && b < limit {
			limit = b
		}
	}
	half := limit / 2
	return half + time.Duration(rand.Int64N(int64(limit-half)+1))
}

// outboxMetrics are the dispatcher's Prometheus metrics.
type outboxMetrics struct {
	delivered prometheus.Counter
	failed    *prometheus.CounterVec
	dead      prometheus.Counter
	reaped    prometheus.Counter
	backlog   prometheus.Collector
	running   prometheus.Gauge
}

func newOutboxMetrics(pool *pgxpool.Pool) *outboxMetrics {
	return &outboxMetrics{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_delivered_total",
			Help: "Outbox events accepted by the receiver (2xx), or logged when no webhook is set. At least once: a redelivery counts again.",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_outbox_failed_total",
			Help: "Failed outbox deliveries: kind=transient (timeout, connection error, 408, 429, 5xx; retried) or permanent (other 3xx/4xx; dead).",
		}, []string{"kind"}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_dead_total",
			Help: "Outbox events that went dead: refused permanently or out of attempts. See `api outbox dead`.",
		}),
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_reaped_total",
			Help: "Outbox events whose claim expired and that the reaper gave back.",
		}),
		backlog: &backlog{pool: pool, q: dbsqlc.New(),
			age: prometheus.NewDesc("ordersvc_outbox_oldest_pending_age_seconds",
				"Age of the oldest pending outbox event (0 when none), read from the database at scrape time.", nil, nil),
			pending: prometheus.NewDesc("ordersvc_outbox_pending_events",
				"Outbox events waiting for delivery, read from the database at scrape time.", nil, nil)},
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ordersvc_outbox_dispatcher_running",
			Help: "1 while this process runs the outbox dispatcher; 0 when OUTBOX_WEBHOOK_URL is unset (events wait for a process that has one).",
		}),
	}
}

func (m *outboxMetrics) register(reg prometheus.Registerer) {
	m.failed.WithLabelValues("transient") // present from the start, at zero
	m.failed.WithLabelValues("permanent")
	reg.MustRegister(m.delivered, m.failed, m.dead, m.reaped, m.backlog, m.running)
}

// backlog computes its gauges at scrape time, so that their cost follows
// the scrape interval rather than the number of replicas and their polls.
// They describe the database, not this process: a replica that runs no
// dispatcher (OUTBOX_WEBHOOK_URL unset) shows the backlog too. When the
// database does not answer in time, the series are left out of the scrape
// rather than reported as made-up values.
type backlog struct {
	pool         *pgxpool.Pool
	q            *dbsqlc.Queries
	age, pending *prometheus.Desc
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) { ch <- b.age; ch <- b.pending }

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := b.q.OutboxPendingBacklog(ctx, b.pool)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(b.age, prometheus.GaugeValue, r.Age)
	ch <- prometheus.MustNewConstMetric(b.pending, prometheus.GaugeValue, float64(r.Pending))
}
