package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// runsDispatcher says whether this process delivers outbox events: only
// with OUTBOX_WEBHOOK_URL set, to a URL or to log. A replica started
// without it must not claim events it cannot deliver: it would mark them
// delivered and the receiver would never see them.
func runsDispatcher(c config) bool { return c.OutboxWebhookURL != "" || c.OutboxLogOnly }

// outboxConfig maps the OUTBOX_* settings onto the dispatcher's.
func outboxConfig(c config) outbox.OutboxConfig {
	return outbox.OutboxConfig{
		WebhookURL:   c.OutboxWebhookURL,
		PollInterval: c.OutboxPollInterval,
		BatchSize:    c.OutboxBatchSize,
		Concurrency:  c.OutboxConcurrency,
		Secrets:      c.OutboxSecrets,
		MaxAttempts:  c.OutboxMaxAttempts,
		ClaimTimeout: c.OutboxClaimTimeout,
		HTTPTimeout:  c.OutboxHTTPTimeout,
		BackoffBase:  c.OutboxBackoffBase,
		BackoffMax:   c.OutboxBackoffMax,
	}
}

// startWorkers starts the background workers, the outbox dispatcher (when
// runsDispatcher; its metrics are registered either way), the
// idempotency purge and the outbox retention, and returns a channel closed when all of them have
// stopped. They stop when ctx ends; the dispatcher first releases the events
// it holds. tp, when not nil, traces each delivery.
func startWorkers(ctx context.Context, pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, c config, tp trace.TracerProvider) <-chan struct{} {
	oc := outboxConfig(c)
	oc.TracerProvider = tp
	dispatcher := outbox.NewDispatcher(pool, log, reg, oc)
	purger := maintenance.NewPurger(pool, log, reg, maintenance.PurgeConfig{Interval: c.CleanupInterval})
	retention := maintenance.NewOutboxRetention(pool, log, reg, maintenance.RetentionConfig{Retention: c.OutboxRetention, Interval: c.CleanupInterval})
	var wg sync.WaitGroup
	if runsDispatcher(c) {
		wg.Go(func() { dispatcher.Run(ctx) })
	} else {
		log.Warn("OUTBOX_WEBHOOK_URL is not set: this process runs no outbox dispatcher; events stay pending until a process with one delivers them (the backlog is in ordersvc_outbox_pending_events)")
	}
	wg.Go(func() { purger.Run(ctx) })
	wg.Go(func() { retention.Run(ctx) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}
