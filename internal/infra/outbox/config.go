package outbox

import (
	"time"

	"go.opentelemetry.io/otel/trace"
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
