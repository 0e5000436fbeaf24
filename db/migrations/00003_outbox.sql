-- +goose Up
-- The transactional outbox (api-contract section 4). A row is written in the
-- same transaction as the state change it reports, so an event exists if and
-- only if its change committed. The dispatcher moves each row
-- pending -> claimed -> delivered, or back to pending with a later
-- available_at after a failure, or to dead after OUTBOX_MAX_ATTEMPTS or a
-- permanent refusal. `api outbox requeue` moves dead rows back to pending.
CREATE TABLE outbox_events (
    id           uuid        PRIMARY KEY,
    type         text        NOT NULL CHECK (type IN ('order.placed', 'order.cancelled', 'order.shipped',
                                                      'payment.recorded', 'stock.adjusted')),
    aggregate_id uuid        NOT NULL,
    payload      jsonb       NOT NULL,
    occurred_at  timestamptz NOT NULL DEFAULT now(),
    state        text        NOT NULL DEFAULT 'pending'
                             CHECK (state IN ('pending', 'claimed', 'delivered', 'dead')),
    attempts     integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    available_at timestamptz NOT NULL DEFAULT now(),
    claimed_at   timestamptz,
    delivered_at timestamptz,
    last_error   text,
    -- A claim is identified by its claimed_at: the guarded updates that end a
    -- claim match on it, so a claim that the reaper took back cannot be
    -- finished by its old owner.
    CONSTRAINT outbox_events_claimed_has_time CHECK (state <> 'claimed' OR claimed_at IS NOT NULL)
);

-- The claim (pattern 5): the due pending events, oldest first. Partial, so it
-- stays as small as the backlog however many delivered rows accumulate.
-- Patterns and rule ids: docs/patterns.md.
CREATE INDEX outbox_events_due_idx ON outbox_events (available_at, id) WHERE state = 'pending';
-- The reaper: claims older than OUTBOX_CLAIM_TIMEOUT.
CREATE INDEX outbox_events_claimed_idx ON outbox_events (claimed_at) WHERE state = 'claimed';
-- The oldest-pending-event gauge, read at each metrics scrape.
CREATE INDEX outbox_events_pending_age_idx ON outbox_events (occurred_at) WHERE state = 'pending';
-- `api outbox dead` and `api outbox requeue --all`.
CREATE INDEX outbox_events_dead_idx ON outbox_events (id) WHERE state = 'dead';

-- +goose Down
DROP TABLE outbox_events;
