package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
)

const outboxUsage = "usage: api outbox dead | api outbox requeue ID|--all"

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

// outbox runs `api outbox dead` (dead events as JSON lines, oldest id first)
// and `api outbox requeue ID|--all` (dead events back to pending, attempts
// reset, due now; prints {"requeued": N}).
func outboxCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "dead" && args[0] != "requeue") ||
		(args[0] == "dead" && len(args) != 1) || (args[0] == "requeue" && len(args) != 2) {
		return errors.New(outboxUsage)
	}
	var id uuid.UUID
	if args[0] == "requeue" && args[1] != "--all" {
		var err error
		if id, err = uuid.Parse(args[1]); err != nil {
			return fmt.Errorf("outbox requeue: %q is not an event id (a UUID) or --all", args[1])
		}
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, c, "outbox", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	admin := outbox.NewOutboxAdmin(pool)
	enc := json.NewEncoder(stdout)

	if args[0] == "dead" {
		const page = 500
		after := uuid.Nil
		for {
			evs, err := admin.Dead(ctx, after, page)
			if err != nil {
				return fmt.Errorf("outbox dead: %w", err)
			}
			for _, ev := range evs {
				if err := enc.Encode(ev); err != nil {
					return err
				}
			}
			if len(evs) < page {
				return nil
			}
			after = evs[len(evs)-1].ID
		}
	}

	var n int64
	if id == uuid.Nil {
		if n, err = admin.RequeueAll(ctx); err != nil {
			return fmt.Errorf("outbox requeue: %w", err)
		}
	} else {
		ok, err := admin.Requeue(ctx, id)
		if err != nil {
			return fmt.Errorf("outbox requeue: %w", err)
		}
		if !ok {
			return fmt.Errorf("outbox requeue: no dead event with id %s", id)
		}
		n = 1
	}
	return enc.Encode(map[string]int64{"requeued": n})
}
