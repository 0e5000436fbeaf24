package outbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

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
		return fmt.Errorf("record %d deliveries: %w", len(ids), postgres.Translate(err))
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
		} else if postgres.IsNoRows(err) {
			n, err = 0, nil
		}
	}
	if err != nil {
		return fmt.Errorf("record outcome of event %s: %w", ev.ID, postgres.Translate(err))
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
		return fmt.Errorf("release %d events: %w", len(ids), postgres.Translate(err))
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
		return 0, fmt.Errorf("reap: %w", postgres.Translate(err))
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
