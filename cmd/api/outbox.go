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

// outboxCommand runs `api outbox dead` (dead events as JSON lines, oldest id first)
// and `api outbox requeue ID|--all` (dead events back to pending, attempts
// reset, due now; prints {"requeued": N}).
func outboxCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	id, err := parseOutbox(args)
	if err != nil {
		return err
	}
	_, pool, err := connect(ctx, getenv, "outbox")
	if err != nil {
		return err
	}
	defer pool.Close()
	admin := outbox.NewOutboxAdmin(pool)
	if args[0] == "dead" {
		return outboxDead(ctx, admin, json.NewEncoder(stdout))
	}
	return outboxRequeue(ctx, admin, id, json.NewEncoder(stdout))
}

// parseOutbox checks the arguments and returns the event id to requeue
// (uuid.Nil for dead, and for requeue --all).
func parseOutbox(args []string) (uuid.UUID, error) {
	switch {
	case len(args) == 1 && args[0] == "dead":
		return uuid.Nil, nil
	case len(args) != 2 || args[0] != "requeue":
		return uuid.Nil, errors.New(outboxUsage)
	case args[1] == "--all":
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(args[1])
	if err != nil {
		return uuid.Nil, fmt.Errorf("outbox requeue: %q is not an event id (a UUID) or --all", args[1])
	}
	return id, nil
}

// outboxDead prints every dead event, a page at a time.
func outboxDead(ctx context.Context, admin outbox.OutboxAdmin, enc *json.Encoder) error {
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

// outboxRequeue requeues the dead event id, or every dead event when id is
// uuid.Nil.
func outboxRequeue(ctx context.Context, admin outbox.OutboxAdmin, id uuid.UUID, enc *json.Encoder) error {
	var n int64
	if id == uuid.Nil {
		var err error
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
