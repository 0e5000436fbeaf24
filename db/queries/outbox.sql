-- name: OutboxInsert :exec
-- Written in the caller's transaction, next to the change the event reports.
INSERT INTO outbox_events (id, type, aggregate_id, payload)
VALUES (@id, @type, @aggregate_id, @payload);

-- name: OutboxClaim :many
-- Pattern 5: lock up to @batch_size due events, skipping rows that another
-- dispatcher has locked, and mark them claimed in the same statement. Once
-- this commits, the rows are out of the due index, so no other dispatcher
-- sees them until they are finished, released or reaped.
-- Patterns and rule ids: docs/patterns.md.
WITH next AS (
    SELECT id
    FROM outbox_events
    WHERE state = 'pending' AND available_at <= now()
    ORDER BY available_at, id
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events e
SET state      = 'claimed',
    claimed_at = now(),
    attempts   = e.attempts + 1
WHERE e.id = ANY (ARRAY(SELECT id FROM next)) -- an id list, so the update probes the primary key
RETURNING e.id, e.type, e.aggregate_id, e.payload, e.occurred_at, e.available_at, e.attempts, e.claimed_at;

-- name: OutboxMarkDelivered :execrows
-- Every event of one claim that the receiver accepted, in one statement.
-- Guarded by the claim: an event missing from the count was reaped (and
-- perhaps taken, even finished, by another dispatcher) while this one was
-- delivering; its new owner's claimed_at differs, so this stale mark leaves
-- it alone.
UPDATE outbox_events
SET state        = 'delivered',
    delivered_at = now(),
    last_error   = NULL
WHERE id = ANY (@ids::uuid[]) AND state = 'claimed' AND claimed_at = @claimed_at;

-- name: OutboxRetryLater :one
-- A failed delivery: back to pending after a backoff, or dead once the
-- attempts are used up. Guarded by the claim like OutboxMarkDelivered.
UPDATE outbox_events
SET state        = CASE WHEN attempts >= @max_attempts::int THEN 'dead' ELSE 'pending' END,
    available_at = now() + make_interval(secs => @backoff_seconds::float8),
    last_error   = @last_error::text
WHERE id = @id AND state = 'claimed' AND claimed_at = @claimed_at
RETURNING state;

-- name: OutboxMarkDead :execrows
-- A permanent refusal by the receiver: no retry will change its answer.
UPDATE outbox_events
SET state      = 'dead',
    last_error = @last_error::text
WHERE id = @id AND state = 'claimed' AND claimed_at = @claimed_at;

-- name: OutboxRelease :execrows
-- Gives back claimed events that were not attempted (shutdown, or the claim
-- running out of time): due again at once, and the attempt is not counted.
UPDATE outbox_events
SET state    = 'pending',
    attempts = attempts - 1
WHERE id = ANY(@ids::uuid[]) AND state = 'claimed' AND claimed_at = @claimed_at;

-- name: OutboxReap :many
-- Returns claims older than the claim timeout to pending: their dispatcher
-- died or stalled. The attempt stays counted, so an event that kills every
-- dispatcher that takes it still ends dead. SKIP LOCKED: the reaper never
-- waits on a dispatcher finishing a claim.
WITH stale AS (
    SELECT id
    FROM outbox_events
    WHERE state = 'claimed'
      AND claimed_at < now() - make_interval(secs => @claim_timeout_seconds::float8)
    ORDER BY claimed_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events e
SET state      = CASE WHEN e.attempts >= @max_attempts::int THEN 'dead' ELSE 'pending' END,
    last_error = 'claim expired: the dispatcher that held it stopped or stalled'
WHERE e.id = ANY (ARRAY(SELECT id FROM stale))
RETURNING e.id, e.state;

-- name: OutboxPendingBacklog :one
-- The backlog, read at scrape time: how many events are pending and how old
-- the oldest is (0 when none). Both from the partial index on pending
-- events, whose size is the backlog's.
SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(occurred_at)), 0)::float8 AS age,
       count(*)::bigint AS pending
FROM outbox_events
WHERE state = 'pending';

-- name: OutboxListDead :many
-- Keyset pagination in id order, so that a long list streams in pages.
SELECT id, type, aggregate_id, payload, occurred_at, attempts, claimed_at, last_error
FROM outbox_events
WHERE state = 'dead' AND id > @after
ORDER BY id
LIMIT @row_limit;

-- name: OutboxRequeue :execrows
UPDATE outbox_events
SET state = 'pending', attempts = 0, available_at = now()
WHERE id = @id AND state = 'dead';

-- name: OutboxRequeueAll :execrows
UPDATE outbox_events
SET state = 'pending', attempts = 0, available_at = now()
WHERE state = 'dead';

-- name: OutboxRetentionLock :one
-- Pattern 6: one replica deletes delivered events at a time, as for the
-- idempotency purge; per transaction, so each batch takes it again.
-- Patterns and rule ids: docs/patterns.md.
SELECT pg_try_advisory_xact_lock(hashtext('ordersvc.outbox_retention')) AS locked;

-- name: OutboxDeleteDelivered :one
-- Deletes at most @batch_size events delivered before @before, oldest
-- first, and returns how many and the latest delivered_at among them.
-- Only delivered events: pending, claimed and dead ones stay whatever their
-- age (a dead event waits for `api outbox requeue`). SKIP LOCKED: the
-- deletion never waits on anyone. @from_delivered is a keyset cursor (the
-- previous batch's latest delivered_at), so that a batch does not rescan
-- the index entries of rows that earlier batches deleted.
WITH gone AS (
    DELETE FROM outbox_events
    WHERE id = ANY (ARRAY(
            SELECT e.id
            FROM outbox_events e
            WHERE e.state = 'delivered'
              AND e.delivered_at < @before::timestamptz
              AND e.delivered_at >= @from_delivered::timestamptz
            ORDER BY e.delivered_at
            LIMIT @batch_size::int
            FOR UPDATE SKIP LOCKED))
      AND state = 'delivered'
    RETURNING delivered_at
)
SELECT count(*) AS deleted, COALESCE(max(gone.delivered_at), @from_delivered::timestamptz)::timestamptz AS last_delivered
FROM gone;
