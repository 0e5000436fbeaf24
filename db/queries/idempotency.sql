-- name: IdempotencySetLockTimeout :exec
-- Bounds how long the claim below may wait for an in-flight duplicate. The
-- setting lasts until the end of the transaction or the next call.
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: IdempotencyClaim :execrows
INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, expires_at)
VALUES (@actor_id, @operation, @key, @fingerprint, 'in_progress',
        now() + make_interval(secs => @ttl_seconds::float8))
ON CONFLICT (actor_id, operation, key) DO NOTHING;

-- name: IdempotencyGet :one
SELECT fingerprint, state, response_status, response_headers, response_body,
       expires_at <= now() AS expired
FROM idempotency_keys
WHERE actor_id = @actor_id AND operation = @operation AND key = @key;

-- name: IdempotencyReclaimExpired :execrows
-- A record past its expiry frees its key (EXT.IDEMPOTENCY.RETENTION.001) even
-- before the purge has removed it: the row is taken over for the new request.
-- A concurrent duplicate that reclaims too waits on this row's lock, so the
-- caller bounds it with IdempotencySetLockTimeout like the claim.
-- Patterns and rule ids: docs/patterns.md.
UPDATE idempotency_keys
SET fingerprint      = @fingerprint,
    state            = 'in_progress',
    response_status  = NULL,
    response_headers = NULL,
    response_body    = NULL,
    created_at       = now(),
    expires_at       = now() + make_interval(secs => @ttl_seconds::float8)
WHERE actor_id = @actor_id AND operation = @operation AND key = @key
  AND expires_at <= now();

-- name: IdempotencyComplete :exec
-- The record's life (IDEMPOTENCY_TTL) counts from its completion, not from
-- its claim: statement_timestamp() is when this statement reached the
-- server, sent with COMMIT at the request's end, while now() is the
-- transaction's start. A request that ran longer than the TTL is still
-- replayable for the whole TTL after it ended. (statement_timestamp(), not
-- clock_timestamp(): one value for the whole statement, as in every
-- engine that speaks PostgreSQL's SQL.)
UPDATE idempotency_keys
SET state            = 'completed',
    response_status  = @response_status,
    response_headers = @response_headers,
    response_body    = @response_body,
    expires_at       = statement_timestamp() + make_interval(secs => @ttl_seconds::float8)
WHERE actor_id = @actor_id AND operation = @operation AND key = @key;

-- name: IdempotencyPurgeLock :one
-- Pattern 6: one replica purges at a time. The lock is per transaction, so
-- each batch takes it again and a replica that dies mid-purge holds nothing.
-- Patterns and rule ids: docs/patterns.md.
SELECT pg_try_advisory_xact_lock(hashtext('ordersvc.idempotency_purge')) AS locked;

-- name: IdempotencyPurgeExpired :one
-- Deletes at most @batch_size expired records (EXT.IDEMPOTENCY.RETENTION.001)
-- and returns how many, and the latest expiry among them.
-- SKIP LOCKED: a record that an in-flight request holds (it is reclaiming an
-- expired key) is left alone, so the purge never waits on a request, and a
-- request waits on the purge for one batch at most. The rows picked are
-- deleted by their primary key (no physical row address, which only
-- PostgreSQL has), and the outer expiry check repeats the guard on the row
-- version actually deleted.
-- @from_expiry is a keyset cursor: the previous batch's latest expiry. It
-- keeps each batch from rescanning the index entries of rows that earlier
-- batches deleted, so a batch costs the same at the end of a long purge as
-- at its start.
-- Patterns and rule ids: docs/patterns.md.
WITH picked AS (
    SELECT k.actor_id, k.operation, k.key
    FROM idempotency_keys k
    WHERE k.expires_at <= now() AND k.expires_at >= @from_expiry::timestamptz
    ORDER BY k.expires_at
    LIMIT @batch_size::int
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM idempotency_keys d
    USING picked p
    WHERE d.actor_id = p.actor_id AND d.operation = p.operation AND d.key = p.key
      AND d.expires_at <= now()
    RETURNING d.expires_at
)
SELECT count(*) AS deleted, COALESCE(max(gone.expires_at), @from_expiry::timestamptz)::timestamptz AS last_expiry
FROM gone;
